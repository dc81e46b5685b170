//===- CudaOpSupport.h - What the CUDA ops share ----------------*- C++ -*-===//
//
// Internal to runtime/cuda: the element-type checks of the CUDA ops (their
// messages name the CUDA kernel), the conversions from shapes to the
// kernels' Dims and Strides, launch-error wrapping, stream-ordered scratch
// memory, and the entry point of each op family, one file each:
// CudaElementwiseOps.cpp, CudaNormOps.cpp, CudaGemmOps.cpp,
// CudaAttentionOps.cpp, CudaLayoutOps.cpp, CudaReduceOps.cpp,
// CudaLossOptimizerOps.cpp. What a
// kernel checks about shapes is runtime/OpShapes.h, shared with the CPU.
//
//===----------------------------------------------------------------------===//

#ifndef AUTOPAR_RUNTIME_CUDA_CUDAOPSUPPORT_H
#define AUTOPAR_RUNTIME_CUDA_CUDAOPSUPPORT_H

#include "runtime/cuda/CudaKernels.h"
#include "runtime/cuda/CudaOps.h"

#include <optional>

namespace autopar {
namespace cuda {

//===----------------------------------------------------------------------===//
// Types, shapes and strides
//===----------------------------------------------------------------------===//

/// The kernels' type of T; nullopt for f8e4m3 (no CUDA kernel).
std::optional<DType> toDType(ElementType T);
/// f32, f16, bf16 or f64: the floats the kernels store.
bool isCudaFloat(ElementType T);
/// The kernels' type of a tensor runCudaKernel has checked.
inline DType dt(const Tensor &T) { return *toDType(T.getElementType()); }

/// "What is TYPE; the CUDA kernel takes Takes".
llvm::Error typeError(const KernelArgs &A, const llvm::Twine &What,
                      const Tensor &T, llvm::StringRef Takes);
/// An error unless operand I (when given) is a float the kernels store.
llvm::Error checkFloat(const KernelArgs &A, unsigned I);
/// An error unless result I (when given) is a float the kernels store.
llvm::Error checkFloatResult(const KernelArgs &A, unsigned I);
/// checkFloat and checkFloatResult of every operand and result.
llvm::Error checkAllFloat(const KernelArgs &A);
/// An error unless operand I is i64 or i32.
llvm::Error checkIndexType(const KernelArgs &A, unsigned I);
/// An error unless operands [0, Count) and every result have one float
/// type and operand 0's shape.
llvm::Error checkSameFloat(const KernelArgs &A, unsigned Count);

/// S as the kernels' Dims; an error above MaxRank.
llvm::Expected<Dims> makeDims(const KernelArgs &A, llvm::ArrayRef<int64_t> S);
Strides makeStrides(llvm::ArrayRef<int64_t> S);
/// Strides of In broadcast to Target.
inline Strides broadcastTo(llvm::ArrayRef<int64_t> In,
                           llvm::ArrayRef<int64_t> Target) {
  return makeStrides(getBroadcastStrides(In, Target));
}

/// A launch's (or an async call's) status as a node error.
llvm::Error launched(const KernelArgs &A, cudaError_t E);
/// A cuBLAS failure as a node error.
llvm::Error cublasNodeError(const KernelArgs &A, cublasStatus_t S,
                            const llvm::Twine &What);
/// Copies Src's bytes to Dst on the stream (nothing when they alias).
llvm::Error copyDevice(const KernelArgs &A, CudaContext &C, const Tensor &Dst,
                       const Tensor &Src);

/// A scratch tensor freed when the guard goes out of scope (after the
/// launches that use it: the allocator is stream-ordered).
class Scratch {
public:
  Scratch(CudaContext &C) : C(C) {}
  ~Scratch() {
    for (const Tensor &T : Held)
      C.freeScratch(T);
  }
  llvm::Expected<Tensor> get(const KernelArgs &A, ElementType Elem,
                             llvm::ArrayRef<int64_t> S) {
    llvm::Expected<Tensor> T = C.allocateScratch(Elem, S);
    if (!T)
      return A.error(llvm::toString(T.takeError()));
    Held.push_back(*T);
    return *T;
  }

private:
  CudaContext &C;
  llvm::SmallVector<Tensor, 4> Held;
};

/// Where a kernel that sums in f32 writes a result Out: Out itself when it
/// is f32, else f32 scratch from S that castFromF32 then copies into Out.
llvm::Expected<Tensor> getF32Sums(const KernelArgs &A, Scratch &S,
                                  const Tensor &Out);
llvm::Error castFromF32(const KernelArgs &A, CudaContext &C, const Tensor &Sums,
                        const Tensor &Out);

/// Row-major C = Alpha op(A) op(B) + Beta C, Batch times at the given
/// element strides (0: the same matrix for every batch).
struct GemmCall {
  bool TransA = false, TransB = false;
  int64_t M = 0, N = 0, K = 0;
  float Alpha = 1, Beta = 0;
  const void *A = nullptr, *B = nullptr;
  void *C = nullptr;
  int64_t Batch = 1, StrideA = 0, StrideB = 0, StrideC = 0;
};

/// Runs G through cuBLAS (CudaGemmOps.cpp), every matrix of T's type, with
/// f32 accumulation.
llvm::Error runGemmCall(const KernelArgs &A, CudaContext &C, const Tensor &T,
                        const GemmCall &G);

//===----------------------------------------------------------------------===//
// The ops, by family (CudaOps.cpp dispatches on getKernelFamily)
//===----------------------------------------------------------------------===//

// CudaElementwiseOps.cpp: binary ops, Sum, Where, Trilu, unary ops,
// SwiGLU, the activation gradients, Dropout (inference: a copy; with a
// random stream: its mask drawn, DropoutStream.h) and DropoutGrad.
llvm::Error runBinary(const KernelArgs &A, CudaContext &C);
llvm::Error runSum(const KernelArgs &A, CudaContext &C);
llvm::Error runWhere(const KernelArgs &A, CudaContext &C);
llvm::Error runTrilu(const KernelArgs &A, CudaContext &C);
llvm::Error runUnary(const KernelArgs &A, CudaContext &C);
llvm::Error runSwiGLU(const KernelArgs &A, CudaContext &C);
llvm::Error runActivationGrad(const KernelArgs &A, CudaContext &C);
llvm::Error runDropout(const KernelArgs &A, CudaContext &C);
llvm::Error runDropoutGrad(const KernelArgs &A, CudaContext &C);

// CudaNormOps.cpp: Softmax, LogSoftmax, SoftmaxGrad, LayerNormalization,
// RMSNormalization and their gradients.
llvm::Error runSoftmax(const KernelArgs &A, CudaContext &C);
llvm::Error runSoftmaxGrad(const KernelArgs &A, CudaContext &C);
llvm::Error runNorm(const KernelArgs &A, CudaContext &C);
llvm::Error runNormGrad(const KernelArgs &A, CudaContext &C);

// CudaGemmOps.cpp: MatMul, Linear, Gemm through cuBLAS.
llvm::Error runMatMul(const KernelArgs &A, CudaContext &C);
llvm::Error runLinear(const KernelArgs &A, CudaContext &C);
llvm::Error runGemm(const KernelArgs &A, CudaContext &C);

// CudaLayoutOps.cpp: reshapes, Transpose, Expand, Concat, Split, Slice,
// Gather, GatherGrad.
llvm::Error runReshapeLike(const KernelArgs &A, CudaContext &C);
llvm::Error runTranspose(const KernelArgs &A, CudaContext &C);
llvm::Error runExpand(const KernelArgs &A, CudaContext &C);
llvm::Error runConcat(const KernelArgs &A, CudaContext &C);
llvm::Error runSplit(const KernelArgs &A, CudaContext &C);
llvm::Error runSlice(const KernelArgs &A, CudaContext &C);
llvm::Error runGather(const KernelArgs &A, CudaContext &C);
llvm::Error runGatherGrad(const KernelArgs &A, CudaContext &C);

// CudaAttentionOps.cpp: Attention (4-D, no cache), AttentionGrad and
// RotaryEmbedding.
llvm::Error runAttention(const KernelArgs &A, CudaContext &C);
llvm::Error runAttentionWithProbs(const KernelArgs &A, CudaContext &C);
llvm::Error runAttentionGrad(const KernelArgs &A, CudaContext &C);
llvm::Error runRotaryEmbedding(const KernelArgs &A, CudaContext &C);

// CudaReduceOps.cpp: ReduceSum, ReduceMean, ReduceMax, Cast.
llvm::Error runReduce(const KernelArgs &A, CudaContext &C);
llvm::Error runCast(const KernelArgs &A, CudaContext &C);

// CudaLossOptimizerOps.cpp: CrossEntropyLoss and its gradient, AdamW, Sgd.
llvm::Error runCrossEntropyLoss(const KernelArgs &A, CudaContext &C);
llvm::Error runCrossEntropyLossGrad(const KernelArgs &A, CudaContext &C);
llvm::Error runAdamW(const KernelArgs &A, CudaContext &C);
llvm::Error runSgd(const KernelArgs &A, CudaContext &C);

} // namespace cuda
} // namespace autopar

#endif // AUTOPAR_RUNTIME_CUDA_CUDAOPSUPPORT_H
