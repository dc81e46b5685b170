//===- CpuBackend.cpp - The CPU backend -----------------------------------===//
//
// Finds a node's kernel by its op. Arithmetic kernels compute in f32: f16,
// bf16, f64 and f8e4m3 operands are converted to f32 copies first and f32
// results converted back after (rounding to nearest even). Kernels that
// only move elements see the tensors as they are.
//
//===----------------------------------------------------------------------===//

#include "runtime/cpu/CpuBackend.h"
#include "runtime/DropoutStream.h"
#include "runtime/KernelFamily.h"
#include "runtime/cpu/CollectiveKernels.h"
#include "runtime/cpu/CpuCommunicator.h"
#include "runtime/cpu/Kernels.h"
#include "runtime/cpu/MpiCommunicator.h"
#include "runtime/cpu/ShardedKernels.h"

#include "ir/Graph.h"
#include "ir/OpFacts.h"

#include "llvm/Support/WithColor.h"
#include "llvm/Support/raw_ostream.h"

#include <algorithm>
#include <cstdlib>
#include <cstring>
#include <new>
#include <optional>

using namespace autopar;
using namespace llvm;

using KernelFn = Error (*)(const KernelArgs &);

/// The CPU kernel of each family (getKernelFamily lists the ops).
static KernelFn lookupKernel(OpId Op) {
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
    return runGeluGrad;
  case KernelFamily::SiluGrad:
    return runSiluGrad;
  case KernelFamily::SwiGLUGrad:
    return runSwiGLUGrad;
  case KernelFamily::Softmax:
    return runSoftmax;
  case KernelFamily::Hardmax:
    return runHardmax;
  case KernelFamily::SoftmaxGrad:
    return runSoftmaxGrad;
  case KernelFamily::LayerNorm:
    return runLayerNorm;
  case KernelFamily::RMSNorm:
    return runRMSNorm;
  case KernelFamily::LayerNormGrad:
    return runLayerNormGrad;
  case KernelFamily::RMSNormGrad:
    return runRMSNormGrad;
  case KernelFamily::BatchNorm:
    return runBatchNorm;
  case KernelFamily::LRN:
    return runLRN;
  case KernelFamily::MatMul:
    return runMatMul;
  case KernelFamily::Linear:
    return runLinear;
  case KernelFamily::Gemm:
    return runGemm;
  case KernelFamily::Conv:
    return runConv;
  case KernelFamily::MaxPool:
    return runMaxPool;
  case KernelFamily::AveragePool:
    return runAveragePool;
  case KernelFamily::GlobalAveragePool:
    return runGlobalAveragePool;
  case KernelFamily::LpPool:
    return runLpPool;
  case KernelFamily::GlobalLpPool:
    return runGlobalLpPool;
  case KernelFamily::Resize:
    return runResize;
  case KernelFamily::Attention:
    return runAttention;
  case KernelFamily::AttentionWithProbs:
    return runAttentionWithProbs;
  case KernelFamily::AttentionGrad:
    return runAttentionGrad;
  case KernelFamily::DropoutGrad:
    return runDropoutGrad;
  case KernelFamily::RotaryEmbedding:
    return runRotaryEmbedding;
  case KernelFamily::ReshapeLike:
    return runReshapeLike;
  case KernelFamily::Dropout:
    return runDropout;
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
  case KernelFamily::GatherElements:
    return runGatherElements;
  case KernelFamily::ScatterElements:
    return runScatterElements;
  case KernelFamily::GatherND:
    return runGatherND;
  case KernelFamily::ScatterND:
    return runScatterND;
  case KernelFamily::Pad:
    return runPad;
  case KernelFamily::DepthSpace:
    return runDepthSpace;
  case KernelFamily::ReverseSequence:
    return runReverseSequence;
  case KernelFamily::Reduce:
    return runReduce;
  case KernelFamily::ArgReduce:
    return runArgReduce;
  case KernelFamily::Constant:
    return runConstant;
  case KernelFamily::ConstantOfShape:
    return runConstantOfShape;
  case KernelFamily::Cast:
    return runCast;
  case KernelFamily::Shape:
    return runShape;
  case KernelFamily::Size:
    return runSize;
  case KernelFamily::EyeLike:
    return runEyeLike;
  case KernelFamily::OneHot:
    return runOneHot;
  case KernelFamily::NllLoss:
    return runNllLoss;
  case KernelFamily::NllLossGrad:
    return runNllLossGrad;
  case KernelFamily::CrossEntropyLoss:
    return runCrossEntropyLoss;
  case KernelFamily::CrossEntropyLossGrad:
    return runCrossEntropyLossGrad;
  case KernelFamily::AdamW:
    return runAdamW;
  case KernelFamily::Sgd:
    return runSgd;
  case KernelFamily::Quantize:
    return runQuantize;
  case KernelFamily::Dequantize:
    return runDequantize;
  case KernelFamily::DynamicQuantize:
    return runDynamicQuantize;
  case KernelFamily::MatMulInteger:
    return runMatMulInteger;
  case KernelFamily::ConvInteger:
    return runConvInteger;
  case KernelFamily::MatMulNBits:
    return runMatMulNBits;
  case KernelFamily::GatherBlockQuantized:
    return runGatherBlockQuantized;
  case KernelFamily::None:
    return nullptr;
  // Communication runs with the communicator (runKernel), not as a kernel.
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

bool CpuBackend::hasKernel(OpId Op) {
  return lookupKernel(Op) != nullptr || isCommunicationOp(Op) ||
         Op == OpId::ShardSlice;
}

std::chrono::milliseconds CpuBackendOptions::getDefaultCommTimeout() {
  std::chrono::milliseconds Default(300 * 1000);
  const char *Value = std::getenv("AUTOPAR_COMM_TIMEOUT");
  if (!Value)
    return Default;
  double Seconds = 0;
  if (StringRef(Value).getAsDouble(Seconds) || !(Seconds > 0) ||
      Seconds > 1e9) {
    WithColor::warning(errs(), "autopar-run")
        << "AUTOPAR_COMM_TIMEOUT='" << Value
        << "' is not a positive number of seconds; using 300\n";
    return Default;
  }
  return std::chrono::milliseconds(
      std::max<int64_t>(1, int64_t(Seconds * 1000)));
}

static std::unique_ptr<Communicator>
createCommunicator(const CpuBackendOptions &Options) {
  if (MpiCommunicator::isLaunchedByMpi())
    return std::make_unique<MpiCommunicator>(Options.CommTimeout);
  return std::make_unique<SingleRankCommunicator>();
}

CpuBackend::CpuBackend(const CpuBackendOptions &Options)
    : Comm(createCommunicator(Options)), CommTimeout(Options.CommTimeout) {
  setBlasThreads(Options.BlasThreads);
  setKernelThreads(Options.BlasThreads);
}

CpuBackend::~CpuBackend() { MpiCommunicator::abortIfFailed(); }

Expected<Tensor> CpuBackend::allocate(ElementType Elem,
                                      ArrayRef<int64_t> Shape) {
  for (int64_t D : Shape)
    if (D < 0)
      return createStringError(inconvertibleErrorCode(),
                               "cannot allocate " +
                                   formatTensorType(Elem, Shape) +
                                   ": negative dimension");
  Tensor Probe(Elem, Shape, nullptr);
  size_t Size = std::max<size_t>(Probe.getSizeInBytes(), 1);
  void *Data = Arena.allocate(Size);
  if (!Data)
    return createStringError(inconvertibleErrorCode(),
                             "cannot allocate " + Twine(Size) + " bytes for " +
                                 Probe.getTypeString());
  return Tensor(Elem, Shape, Data);
}

void CpuBackend::deallocate(const Tensor &T) {
  if (T.isPresent())
    Arena.release(T.getData());
}

Error CpuBackend::copyFromHost(const Tensor &Dst, ArrayRef<uint8_t> Bytes) {
  if (Bytes.size() != Dst.getSizeInBytes())
    return createStringError(inconvertibleErrorCode(),
                             "cannot copy " + Twine(Bytes.size()) +
                                 " bytes into " + Dst.getTypeString());
  if (!Bytes.empty())
    std::memcpy(Dst.getData(), Bytes.data(), Bytes.size());
  return Error::success();
}

Error CpuBackend::copyToHost(const Tensor &Src,
                             MutableArrayRef<uint8_t> Bytes) {
  if (Bytes.size() != Src.getSizeInBytes())
    return createStringError(inconvertibleErrorCode(),
                             "cannot copy " + Src.getTypeString() + " into " +
                                 Twine(Bytes.size()) + " bytes");
  if (!Bytes.empty())
    std::memcpy(Bytes.data(), Src.getData(), Bytes.size());
  return Error::success();
}

static bool isConvertedToF32(const Tensor &T) {
  if (!T.isPresent())
    return false;
  switch (T.getElementType()) {
  case ElementType::F16:
  case ElementType::BF16:
  case ElementType::F64:
  case ElementType::F8E4M3:
    return true;
  default:
    return false;
  }
}

/// Element I of T (of a type isConvertedToF32 accepts) as a float.
static float loadAsFloat(const Tensor &T, int64_t I) {
  const char *P = static_cast<const char *>(T.getData());
  switch (T.getElementType()) {
  case ElementType::F16:
  case ElementType::BF16: {
    uint16_t Bits;
    std::memcpy(&Bits, P + 2 * I, 2);
    return T.getElementType() == ElementType::F16 ? halfToFloat(Bits)
                                                  : bfloat16ToFloat(Bits);
  }
  case ElementType::F64: {
    double V;
    std::memcpy(&V, P + 8 * I, 8);
    return float(V);
  }
  default:
    return float(decodeF8E4M3(uint8_t(P[I])));
  }
}

static void storeFromFloat(const Tensor &T, int64_t I, float V) {
  char *P = static_cast<char *>(T.getData());
  switch (T.getElementType()) {
  case ElementType::F16:
  case ElementType::BF16: {
    uint16_t Bits = T.getElementType() == ElementType::F16 ? floatToHalf(V)
                                                           : floatToBfloat16(V);
    std::memcpy(P + 2 * I, &Bits, 2);
    return;
  }
  case ElementType::F64: {
    double D = V;
    std::memcpy(P + 8 * I, &D, 8);
    return;
  }
  default:
    P[I] = char(encodeF8E4M3(V));
  }
}

Error CpuBackend::runNode(const Node &N, ArrayRef<Tensor> Inputs,
                          ArrayRef<Tensor> Outputs) {
  Error E = runKernel(N, Inputs, Outputs);
  if (E)
    MpiCommunicator::noteFailure();
  return E;
}

Error CpuBackend::runNodes(ArrayRef<const Node *> Nodes,
                           ArrayRef<ArrayRef<Tensor>> Inputs,
                           ArrayRef<ArrayRef<Tensor>> Outputs) {
  auto IsF32 = [](const Tensor &T) {
    return !T.isPresent() || T.getElementType() == ElementType::F32;
  };
  if (Nodes.size() == 2 && Nodes[0]->getOp() == OpId::Linear) {
    Expected<bool> Fused =
        runLinearEpilogue(KernelArgs{*Nodes[0], Inputs[0], Outputs[0]},
                          KernelArgs{*Nodes[1], Inputs[1], Outputs[1]});
    if (!Fused) {
      MpiCommunicator::noteFailure();
      return Fused.takeError();
    }
    if (*Fused)
      return Error::success();
    return Backend::runNodes(Nodes, Inputs, Outputs);
  }
  bool Group = Nodes.size() > 1;
  for (size_t K = 0; K != Nodes.size() && Group; ++K)
    Group = Nodes[K]->getOp() == OpId::AdamW && all_of(Inputs[K], IsF32) &&
            all_of(Outputs[K], IsF32);
  if (!Group)
    return Backend::runNodes(Nodes, Inputs, Outputs);
  std::vector<KernelArgs> Args;
  for (size_t K = 0; K != Nodes.size(); ++K)
    Args.push_back(KernelArgs{*Nodes[K], Inputs[K], Outputs[K]});
  Error E = runAdamWGroup(Args);
  if (E)
    MpiCommunicator::noteFailure();
  return E;
}

Error CpuBackend::runKernel(const Node &N, ArrayRef<Tensor> Inputs,
                            ArrayRef<Tensor> Outputs) {
  // Communication moves the tensors as they are (sums of narrow floats
  // add in f32 inside the communicator).
  if (isCommunicationOp(N.getOp()))
    return runCommunication(KernelArgs{N, Inputs, Outputs}, *Comm, CommTimeout);
  if (isShardedKernel(N))
    return runShardedKernel(KernelArgs{N, Inputs, Outputs}, *Comm, CommTimeout);
  KernelFn Kernel = lookupKernel(N.getOp());
  if (!Kernel)
    return createNodeError(N, "no CPU kernel");
  // A node that draws a dropout mask gets its block of the random tensor.
  std::optional<DropoutBlock> Block;
  if (drawsDropoutMask(N)) {
    Expected<DropoutBlock> B =
        getDropoutBlock(KernelArgs{N, Inputs, Outputs}, *Comm, getStepRandom());
    if (!B)
      return B.takeError();
    Block = *B;
  }
  const DropoutBlock *Drop = Block ? &*Block : nullptr;
  if (onlyMovesElements(getKernelFamily(N.getOp())) ||
      (llvm::none_of(Inputs, isConvertedToF32) &&
       llvm::none_of(Outputs, isConvertedToF32)))
    return Kernel(KernelArgs{N, Inputs, Outputs, Drop});

  // Compute in f32 on converted copies.
  SmallVector<Tensor, 4> In(Inputs.begin(), Inputs.end());
  SmallVector<Tensor, 4> Out(Outputs.begin(), Outputs.end());
  SmallVector<Tensor, 8> Temps;
  auto FreeTemps = [&] {
    for (const Tensor &T : Temps)
      deallocate(T);
  };
  auto MakeF32 = [&](Tensor &T) -> Error {
    Expected<Tensor> F = allocate(ElementType::F32, T.getShape());
    if (!F)
      return F.takeError();
    Temps.push_back(*F);
    T = *F;
    return Error::success();
  };
  for (unsigned I = 0; I != In.size(); ++I) {
    if (!isConvertedToF32(In[I]))
      continue;
    if (Error E = MakeF32(In[I])) {
      FreeTemps();
      return E;
    }
    for (int64_t J = 0, E = In[I].getNumElements(); J != E; ++J)
      In[I].data<float>()[J] = loadAsFloat(Inputs[I], J);
  }
  for (unsigned I = 0; I != Out.size(); ++I)
    if (isConvertedToF32(Out[I]))
      if (Error E = MakeF32(Out[I])) {
        FreeTemps();
        return E;
      }
  Error E = Kernel(KernelArgs{N, In, Out, Drop});
  if (!E)
    for (unsigned I = 0; I != Out.size(); ++I)
      if (isConvertedToF32(Outputs[I]))
        for (int64_t J = 0, End = Out[I].getNumElements(); J != End; ++J)
          storeFromFloat(Outputs[I], J, Out[I].data<float>()[J]);
  FreeTemps();
  return E;
}
