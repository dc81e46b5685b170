//===- CudaOps.cpp - Nodes on the CUDA device -----------------------------===//
//
// See CudaOps.h. Floats are f32, f16, bf16 or f64 in storage (f8e4m3 has no
// CUDA kernel); kernels take any mix of them and compute as CudaKernels.h
// says. This file maps each kernel family (runtime/KernelFamily.h) to its
// CUDA op; the ops are in one file per family (CudaOpSupport.h lists them).
//
//===----------------------------------------------------------------------===//

#include "runtime/cuda/CudaOps.h"
#include "runtime/KernelFamily.h"
#include "runtime/cuda/CudaOpSupport.h"

#include "ir/Graph.h"

using namespace autopar;
using namespace autopar::cuda;
using namespace llvm;

using CudaKernelFn = Error (*)(const KernelArgs &, CudaContext &);

/// The CUDA op of each family; null where the family has none here.
static CudaKernelFn lookup(OpId Op) {
  switch (getKernelFamily(Op)) {
  case KernelFamily::Binary:
    return runBinary;
  case KernelFamily::Sum:
    return runSum;
  case KernelFamily::Where:
    return runWhere;
  case KernelFamily::Trilu:
    return runTrilu;
  case KernelFamily::Unary:
    return runUnary;
  case KernelFamily::SwiGLU:
    return runSwiGLU;
  case KernelFamily::GeluGrad:
  case KernelFamily::SiluGrad:
  case KernelFamily::SwiGLUGrad:
    return runActivationGrad;
  case KernelFamily::Softmax:
    return runSoftmax;
  case KernelFamily::SoftmaxGrad:
    return runSoftmaxGrad;
  case KernelFamily::LayerNorm:
  case KernelFamily::RMSNorm:
    return runNorm;
  case KernelFamily::LayerNormGrad:
  case KernelFamily::RMSNormGrad:
    return runNormGrad;
  case KernelFamily::MatMul:
    return runMatMul;
  case KernelFamily::Linear:
    return runLinear;
  case KernelFamily::Gemm:
    return runGemm;
  case KernelFamily::ReshapeLike:
    return runReshapeLike;
  case KernelFamily::Dropout:
    return runDropout;
  case KernelFamily::DropoutGrad:
    return runDropoutGrad;
  case KernelFamily::Transpose:
    return runTranspose;
  case KernelFamily::Expand:
    return runExpand;
  case KernelFamily::Concat:
    return runConcat;
  case KernelFamily::Split:
    return runSplit;
  case KernelFamily::Slice:
    return runSlice;
  case KernelFamily::Gather:
    return runGather;
  case KernelFamily::GatherGrad:
    return runGatherGrad;
  case KernelFamily::Reduce:
    return runReduce;
  case KernelFamily::Cast:
    return runCast;
  case KernelFamily::CrossEntropyLoss:
    return runCrossEntropyLoss;
  case KernelFamily::CrossEntropyLossGrad:
    return runCrossEntropyLossGrad;
  case KernelFamily::AdamW:
    return runAdamW;
  case KernelFamily::Attention:
    return runAttention;
  case KernelFamily::AttentionWithProbs:
    return runAttentionWithProbs;
  case KernelFamily::AttentionGrad:
    return runAttentionGrad;
  case KernelFamily::RotaryEmbedding:
    return runRotaryEmbedding;
  case KernelFamily::Sgd:
    return runSgd;
  // No CUDA kernel yet (the backend runs some of these on the host).
  case KernelFamily::Hardmax:
  case KernelFamily::ArgReduce:
  case KernelFamily::BatchNorm:
  case KernelFamily::LRN:
  case KernelFamily::Conv:
  case KernelFamily::MaxPool:
  case KernelFamily::AveragePool:
  case KernelFamily::GlobalAveragePool:
  case KernelFamily::Constant:
  case KernelFamily::ConstantOfShape:
  case KernelFamily::Shape:
  case KernelFamily::Size:
  case KernelFamily::Quantize:
  case KernelFamily::Dequantize:
  case KernelFamily::DynamicQuantize:
  case KernelFamily::MatMulInteger:
  case KernelFamily::ConvInteger:
  case KernelFamily::MatMulNBits:
  case KernelFamily::GatherBlockQuantized:
  case KernelFamily::GatherElements:
  case KernelFamily::ScatterElements:
  case KernelFamily::GatherND:
  case KernelFamily::ScatterND:
  case KernelFamily::Pad:
  case KernelFamily::DepthSpace:
  case KernelFamily::ReverseSequence:
  case KernelFamily::LpPool:
  case KernelFamily::GlobalLpPool:
  case KernelFamily::Resize:
  case KernelFamily::EyeLike:
  case KernelFamily::OneHot:
  case KernelFamily::NllLoss:
  case KernelFamily::NllLossGrad:
  case KernelFamily::None:
    return nullptr;
  // Communication runs through NCCL in CudaBackend, not as a kernel.
  case KernelFamily::AllReduce:
  case KernelFamily::AllGather:
  case KernelFamily::ReduceScatter:
  case KernelFamily::AllToAll:
  case KernelFamily::ShardSlice:
  case KernelFamily::SendRecv:
  case KernelFamily::Send:
  case KernelFamily::Recv:
    return nullptr;
  }
  return nullptr;
}

bool autopar::hasCudaKernel(OpId Op) { return lookup(Op) != nullptr; }

Error autopar::runCudaKernel(const KernelArgs &A, CudaContext &C) {
  CudaKernelFn Fn = lookup(A.N.getOp());
  if (!Fn)
    return A.error("no CUDA kernel");
  for (const Tensor &T : A.In)
    if (T.isPresent() && !toDType(T.getElementType()))
      return typeError(A, "an operand", T, "no f8e4m3");
  for (const Tensor &T : A.Out)
    if (T.isPresent() && !toDType(T.getElementType()))
      return typeError(A, "a result", T, "no f8e4m3");
  return Fn(A, C);
}
