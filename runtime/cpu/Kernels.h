//===- Kernels.h - The CPU kernels, one function per op family --*- C++ -*-===//
//
// Each kernel implements the ONNX semantics of its ops (newest opset, as
// ir/Ops.def says) for static shapes, in fp32 with i64, i32 and bool where
// the op takes integers; the backend converts f16, bf16, f64 and f8e4m3
// operands of arithmetic ops to f32 around them. Kernels that only move
// elements (layouts, slices, gathers, Cast, Constant, Where) take every
// element type. Every reduction runs in a fixed order, so results do not
// depend on threads. The file of each family is named after it.
//
//===----------------------------------------------------------------------===//

#ifndef AUTOPAR_RUNTIME_CPU_KERNELS_H
#define AUTOPAR_RUNTIME_CPU_KERNELS_H

#include "runtime/cpu/KernelSupport.h"

namespace autopar {

// ElementwiseKernels.cpp: Add, Sub, Mul, Div, Pow, Mod, PRelu, Equal, Less,
// Greater, LessOrEqual, GreaterOrEqual, And, Or, Xor with numpy
// broadcasting; Sum, Mean, Min, Max; Where; Trilu.
llvm::Error runBinary(const KernelArgs &A);
llvm::Error runSum(const KernelArgs &A);
llvm::Error runWhere(const KernelArgs &A);
llvm::Error runTrilu(const KernelArgs &A);

// UnaryKernels.cpp: Neg, Abs, Sqrt, Reciprocal, Exp, Log, Tanh, Erf,
// Sigmoid, Relu, LeakyRelu, Not, Gelu (erf and tanh), Silu, and through the
// kernels below every other op of the Unary family; SwiGLU.
llvm::Error runUnary(const KernelArgs &A);
llvm::Error runSwiGLU(const KernelArgs &A);

// UnaryMathKernels.cpp: Ceil .. Shrink and Clip (ElementFn), Sign, Shrink
// and Clip also on integers; IsNaN and IsInf (to bool).
llvm::Error runUnaryMath(const KernelArgs &A);
llvm::Error runFloatClass(const KernelArgs &A);

// BitwiseKernels.cpp: BitwiseAnd, BitwiseOr, BitwiseXor and BitShift
// (broadcasting); BitwiseNot.
llvm::Error runBitwise(const KernelArgs &A);
llvm::Error runBitwiseNot(const KernelArgs &A);

// SoftmaxKernels.cpp: Softmax and LogSoftmax along one axis; Hardmax.
llvm::Error runSoftmax(const KernelArgs &A);
llvm::Error runHardmax(const KernelArgs &A);

// MatMulKernels.cpp: GEMMs through CBLAS.
llvm::Error runMatMul(const KernelArgs &A);
llvm::Error runLinear(const KernelArgs &A);
/// Linear followed by a node that reads its result: Gelu of it, or an Add
/// of it and a tensor of its shape (a residual). Fused, the GEMM runs over
/// blocks of rows (bias preloaded) and the epilogue on each block while it
/// is in cache; each element as the two kernels compute it. False when the
/// pair is not one of these (nothing was run).
llvm::Expected<bool> runLinearEpilogue(const KernelArgs &Lin,
                                       const KernelArgs &Epi);
llvm::Error runGemm(const KernelArgs &A);
/// Row-major C[M, N] = Alpha * op(A) op(B) + Beta * C through cblas_sgemm,
/// also for empty sizes.
void sgemm(bool TransA, bool TransB, int64_t M, int64_t N, int64_t K,
           float Alpha, const float *A, const float *B, float Beta, float *C);
/// The same with leading dimensions (elements between rows) of each
/// matrix, for blocks of larger ones.
void sgemm(bool TransA, bool TransB, int64_t M, int64_t N, int64_t K,
           float Alpha, const float *A, int64_t LdA, const float *B,
           int64_t LdB, float Beta, float *C, int64_t LdC);
/// Sets OpenBLAS's thread count.
void setBlasThreads(int Threads);
/// While alive, OpenBLAS runs each call on its caller's thread alone (for
/// kernels whose threads call it, one GEMM each), then as many as before.
class SerialBlas {
public:
  SerialBlas();
  ~SerialBlas();
  SerialBlas(const SerialBlas &) = delete;
  SerialBlas &operator=(const SerialBlas &) = delete;

private:
  int Threads;
};

/// The threads kernels may use besides BLAS's (CpuBackendOptions'
/// BlasThreads; set by the backend).
void setKernelThreads(int Threads);
/// Runs Body(I) for I in [0, N) on up to the kernel threads, each thread a
/// contiguous range. Bodies must write disjoint data, so the results do not
/// depend on the thread count.
void parallelFor(int64_t N, llvm::function_ref<void(int64_t)> Body);
/// Elements per chunk of parallelForChunks: large enough to hide a thread's
/// start, small enough to spread a layer's activations.
constexpr int64_t ElementsPerChunk = 1 << 16;
/// Runs Body(Begin, End) over [0, N) in chunks of ElementsPerChunk on the
/// kernel threads: a split that depends only on N.
void parallelForChunks(int64_t N,
                       llvm::function_ref<void(int64_t, int64_t)> Body);

// NormKernels.cpp: LayerNormalization (with Mean and InvStdDev) and
// RMSNormalization.
llvm::Error runLayerNorm(const KernelArgs &A);
llvm::Error runRMSNorm(const KernelArgs &A);

// ChannelNormKernels.cpp: BatchNormalization (inference form) and LRN.
llvm::Error runBatchNorm(const KernelArgs &A);
llvm::Error runLRN(const KernelArgs &A);

// ConvKernels.cpp: Conv (im2col and one GEMM per image and group).
llvm::Error runConv(const KernelArgs &A);

// PoolKernels.cpp: MaxPool (with Indices), AveragePool, GlobalAveragePool,
// LpPool, GlobalLpPool.
llvm::Error runMaxPool(const KernelArgs &A);
llvm::Error runAveragePool(const KernelArgs &A);
llvm::Error runGlobalAveragePool(const KernelArgs &A);
llvm::Error runLpPool(const KernelArgs &A);
llvm::Error runGlobalLpPool(const KernelArgs &A);

// ResizeKernels.cpp (the taps in ResizeTaps.cpp): Resize (nearest on any
// element type, linear and cubic in f32, with or without antialias; every
// coordinate transformation).
llvm::Error runResize(const KernelArgs &A);

// DropoutKernels.cpp: Dropout (inference: a copy; with a random stream:
// the mask drawn for A.Dropout) and DropoutGrad.
llvm::Error runDropout(const KernelArgs &A);
llvm::Error runDropoutGrad(const KernelArgs &A);

// AttentionKernel.cpp: ONNX Attention (opset 23).
llvm::Error runAttention(const KernelArgs &A);
llvm::Error runAttentionWithProbs(const KernelArgs &A);
// RotaryKernel.cpp: ONNX RotaryEmbedding (opset 23).
llvm::Error runRotaryEmbedding(const KernelArgs &A);

// LayoutKernels.cpp: Reshape, Flatten, Squeeze, Unsqueeze and Identity
// copy; Transpose; Expand.
llvm::Error runReshapeLike(const KernelArgs &A);
llvm::Error runTranspose(const KernelArgs &A);
llvm::Error runExpand(const KernelArgs &A);

// SliceKernels.cpp: Concat, Split, Slice, Gather.
llvm::Error runConcat(const KernelArgs &A);
llvm::Error runSplit(const KernelArgs &A);
llvm::Error runSlice(const KernelArgs &A);
llvm::Error runGather(const KernelArgs &A);

// IndexKernels.cpp: GatherElements, ScatterElements, GatherND, ScatterND
// (reductions add, mul, max, min in f32, i64 or i32); OneHot; EyeLike.
llvm::Error runGatherElements(const KernelArgs &A);
llvm::Error runScatterElements(const KernelArgs &A);
llvm::Error runGatherND(const KernelArgs &A);
llvm::Error runScatterND(const KernelArgs &A);
llvm::Error runOneHot(const KernelArgs &A);
llvm::Error runEyeLike(const KernelArgs &A);

// PadKernels.cpp: Pad (constant, reflect, edge, wrap); SpaceToDepth and
// DepthToSpace (DCR, CRD); ReverseSequence.
llvm::Error runPad(const KernelArgs &A);
llvm::Error runDepthSpace(const KernelArgs &A);
llvm::Error runReverseSequence(const KernelArgs &A);

// ReduceKernels.cpp: ReduceSum, ReduceMean, ReduceMax, ReduceMin,
// ReduceProd, ReduceL1, ReduceL2, ReduceLogSum, ReduceLogSumExp,
// ReduceSumSquare; ArgMax and ArgMin.
llvm::Error runReduce(const KernelArgs &A);
llvm::Error runArgReduce(const KernelArgs &A);

// DataKernels.cpp: Constant, ConstantOfShape, Cast, Shape, Size.
llvm::Error runConstant(const KernelArgs &A);
llvm::Error runConstantOfShape(const KernelArgs &A);
llvm::Error runCast(const KernelArgs &A);
llvm::Error runShape(const KernelArgs &A);
llvm::Error runSize(const KernelArgs &A);

// LossKernels.cpp: CrossEntropyLoss and NegativeLogLikelihoodLoss, and
// their gradients.
llvm::Error runCrossEntropyLoss(const KernelArgs &A);
llvm::Error runCrossEntropyLossGrad(const KernelArgs &A);
llvm::Error runNllLoss(const KernelArgs &A);
llvm::Error runNllLossGrad(const KernelArgs &A);

// NormGradKernels.cpp: LayerNormalizationGrad, RMSNormalizationGrad.
llvm::Error runLayerNormGrad(const KernelArgs &A);
llvm::Error runRMSNormGrad(const KernelArgs &A);

// AttentionKernel.cpp: AttentionGrad (4-D, no cache, no softcap).
llvm::Error runAttentionGrad(const KernelArgs &A);

// ActivationGradKernels.cpp: GeluGrad, SiluGrad, SwiGLUGrad, SoftmaxGrad,
// GatherGrad.
llvm::Error runGeluGrad(const KernelArgs &A);
llvm::Error runSiluGrad(const KernelArgs &A);
llvm::Error runSwiGLUGrad(const KernelArgs &A);
llvm::Error runSoftmaxGrad(const KernelArgs &A);
llvm::Error runGatherGrad(const KernelArgs &A);

// QuantizedKernels.cpp: QuantizeLinear, DequantizeLinear,
// DynamicQuantizeLinear, MatMulInteger (exact i32 sums), MatMulNBits (2, 4
// or 8 bits) and GatherBlockQuantized.
llvm::Error runQuantize(const KernelArgs &A);
llvm::Error runDequantize(const KernelArgs &A);
llvm::Error runDynamicQuantize(const KernelArgs &A);
llvm::Error runMatMulInteger(const KernelArgs &A);
// ConvKernels.cpp: ConvInteger (exact i32 sums through a double GEMM).
llvm::Error runConvInteger(const KernelArgs &A);
llvm::Error runMatMulNBits(const KernelArgs &A);
llvm::Error runGatherBlockQuantized(const KernelArgs &A);

// OptimizerKernels.cpp: AdamW and Sgd steps (in place).
llvm::Error runAdamW(const KernelArgs &A);
/// AdamW nodes that read the same hyper-parameters and step, as one
/// multi-tensor loop over all their elements (each element as runAdamW
/// computes it).
llvm::Error runAdamWGroup(llvm::ArrayRef<KernelArgs> Nodes);
llvm::Error runSgd(const KernelArgs &A);

} // namespace autopar

#endif // AUTOPAR_RUNTIME_CPU_KERNELS_H
