//===- CudaKernels.h - The CUDA kernels' launchers --------------*- C++ -*-===//
//
// What the .cu files export to the backend: plain functions that launch one
// kernel (or a few) on a stream and return cudaGetLastError(). They know
// nothing of nodes, attributes or LLVM: the backend (CudaOps.cpp) checks
// shapes and types, computes sizes and strides, and names the node in
// errors. Floats are stored as f32, f16 or bf16 (DType) and computed in f32
// (reductions in f64, except the flash-attention kernels' running sums);
// the launchers take the storage type of each operand, so one compiled
// kernel serves every mix of types.
//
// Index checks on the device (Gather's indices, the loss's labels) set a
// word in device memory (ErrorWord) to the code of the first failure; the
// backend reads it when it next synchronises and names the node.
//
//===----------------------------------------------------------------------===//

#ifndef AUTOPAR_RUNTIME_CUDA_CUDAKERNELS_H
#define AUTOPAR_RUNTIME_CUDA_CUDAKERNELS_H

#include "runtime/DropoutMask.h"

#include <cuda_runtime_api.h>

#include <cstdint>

namespace autopar {
namespace cuda {

/// Storage types the kernels read and write.
enum class DType : int { F32, F16, BF16, F64, I64, I32, I8, U8, Bool };

/// Tensors of up to this rank; the backend merges or rejects higher ones.
constexpr int MaxRank = 8;

/// A row-major iteration space: Rank dimensions, the last fastest.
struct Dims {
  int Rank = 0;
  int64_t Size[MaxRank] = {};
};
/// Element strides of one operand over a Dims (0 where it broadcasts).
struct Strides {
  int64_t S[MaxRank] = {};
};

/// Dst[DstBase + i . DstStrides] = Src[SrcBase + i . SrcStrides] for every
/// index i of Shape; elements of ElemSize bytes (1, 2, 4 or 8). Transposes,
/// broadcasts, slices, concatenations and splits are all this copy.
cudaError_t copyStrided(void *Dst, int64_t DstBase, const Strides &DstStrides,
                        const void *Src, int64_t SrcBase,
                        const Strides &SrcStrides, const Dims &Shape,
                        int ElemSize, cudaStream_t Stream);

enum class UnaryOp : int {
  Neg,
  Abs,
  Sqrt,
  Reciprocal,
  Exp,
  Log,
  Tanh,
  Erf,
  Sigmoid,
  Relu,
  LeakyRelu,
  GeluErf,
  GeluTanh,
  Silu,
  Not, // bool
  // ONNX's other functions, with its attributes as Alpha and Beta.
  Ceil,
  Floor,
  Round, // Half to even.
  Sign,
  Sin,
  Cos,
  Tan,
  Asin,
  Acos,
  Atan,
  Sinh,
  Cosh,
  Asinh,
  Acosh,
  Atanh,
  Softplus,
  Softsign,
  Elu,         // Alpha.
  Selu,        // Alpha, Beta = gamma.
  Celu,        // Alpha.
  HardSigmoid, // Alpha, Beta.
  HardSwish,
  Mish,
  ThresholdedRelu, // Alpha.
  Shrink,          // Alpha = bias, Beta = lambd.
  Clip,            // Alpha = min, Beta = max.
  IsNaN,           // Result bool.
  IsInf,           // Result bool; Alpha, Beta: detect negative, positive.
};
/// Y[i] = Op(X[i]) for N elements; Alpha and Beta are the op's parameters
/// (LeakyRelu's slope, as the list above says).
cudaError_t unary(UnaryOp Op, float Alpha, float Beta, DType XT, const void *X,
                  DType YT, void *Y, int64_t N, cudaStream_t Stream);

enum class BinaryOp : int {
  Add,
  Sub,
  Mul,
  Div,
  Pow,
  Equal,          // result bool
  Less,           // result bool
  Greater,        // result bool
  And,            // bool
  Or,             // bool
  Min,            // NaN propagates.
  Max,            // NaN propagates.
  Fmod,           // C's fmod (ONNX Mod with fmod = 1).
  GreaterOrEqual, // result bool
  LessOrEqual,    // result bool
  Xor,            // bool
  PRelu,          // X < 0 ? Y * X : X.
};
/// Z[i] = Op(X[i . XS], Y[i . YS]) over Shape (Z contiguous). Float
/// operands (f32, f16, bf16) compute in f32; And, Or and Xor take bool.
cudaError_t binary(BinaryOp Op, DType XT, const void *X, const Strides &XS,
                   DType YT, const void *Y, const Strides &YS, DType ZT,
                   void *Z, const Dims &Shape, cudaStream_t Stream);

/// Z[i] = C[i . CS] ? X[i . XS] : Y[i . YS] over Shape, any element type.
cudaError_t where(const uint8_t *C, const Strides &CS, const void *X,
                  const Strides &XS, const void *Y, const Strides &YS, void *Z,
                  const Dims &Shape, int ElemSize, cudaStream_t Stream);

/// Trilu over the last two dimensions (Rows x Cols) of N elements.
cudaError_t trilu(const void *X, void *Y, int64_t N, int64_t Rows, int64_t Cols,
                  int64_t K, bool Upper, int ElemSize, cudaStream_t Stream);

/// Cast with the CPU kernel's rules (floats to integers truncate and
/// saturate, NaN to 0; integers wrap; anything to bool is "not zero").
cudaError_t cast(DType XT, const void *X, DType YT, void *Y, int64_t N,
                 cudaStream_t Stream);

/// Y = Scale * X elementwise (N elements), e.g. Gemm's beta * C.
cudaError_t scale(DType XT, const void *X, DType YT, void *Y, int64_t N,
                  float Factor, cudaStream_t Stream);

/// Training-mode dropout of N elements (the block B of its random tensor,
/// DropoutMask.h): Y = X * Scale where kept, else 0; Mask (may be null)
/// gets 1 where kept.
cudaError_t dropout(DType T, const void *X, void *Y, uint8_t *Mask, int64_t N,
                    const DropoutBlock &B, cudaStream_t Stream);
/// dX = dY * Scale where Mask, else 0 (N elements).
cudaError_t dropoutGrad(DType T, const void *DY, const uint8_t *Mask, void *DX,
                        int64_t N, float Scale, cudaStream_t Stream);

/// SwiGLU: Y = A sigmoid(Alpha A) B.
cudaError_t swiglu(DType T, const void *A, const void *B, void *Y, int64_t N,
                   float Alpha, cudaStream_t Stream);
/// dX = dY * Gelu'(X) (erf or tanh form).
cudaError_t geluGrad(DType T, const void *DY, const void *X, void *DX,
                     int64_t N, bool Tanh, cudaStream_t Stream);
/// dX = dY * Silu'(X).
cudaError_t siluGrad(DType T, const void *DY, const void *X, void *DX,
                     int64_t N, cudaStream_t Stream);
/// dA, dB of SwiGLU.
cudaError_t swigluGrad(DType T, const void *DY, const void *A, const void *B,
                       void *DA, void *DB, int64_t N, float Alpha,
                       cudaStream_t Stream);

/// Softmax (or LogSoftmax) over Len elements at stride Inner, for Outer x
/// Inner rows.
cudaError_t softmax(DType XT, const void *X, DType YT, void *Y, int64_t Outer,
                    int64_t Len, int64_t Inner, bool Log, cudaStream_t Stream);
/// dX = Y * (dY - sum(dY * Y)) along the same rows.
cudaError_t softmaxGrad(DType T, const void *DY, const void *Y, void *DX,
                        int64_t Outer, int64_t Len, int64_t Inner,
                        cudaStream_t Stream);

/// LayerNormalization (Centered) or RMSNormalization over Rows rows of Len
/// contiguous elements; Scale and Bias (may be null) hold Len elements;
/// Mean and InvStdDev (may be null) one per row, of type StatT.
cudaError_t norm(bool Centered, DType XT, const void *X, DType ST,
                 const void *Scale, const void *Bias, DType YT, void *Y,
                 DType StatT, void *Mean, void *InvStdDev, int64_t Rows,
                 int64_t Len, double Epsilon, cudaStream_t Stream);
/// The gradients: dX (type of X), dScale and dBias (may be null; type of
/// Scale). Work must hold 2 * Len * ceil(Rows / RowsPerPart) doubles as
/// normGradWorkDoubles says.
cudaError_t normGrad(bool Centered, DType T, const void *DY, const void *X,
                     DType ST, const void *Scale, void *DX, void *DScale,
                     void *DBias, int64_t Rows, int64_t Len, double Epsilon,
                     double *Work, cudaStream_t Stream);
int64_t normGradWorkDoubles(int64_t Rows, int64_t Len);

/// Reduce Sum, Mean, Max, Min, L1, L2, SumSquare or LogSum (ONNX's
/// ReduceX; Min as the negated maximum of the negated elements, the others
/// as sums of |x| or x * x, then sqrt or log): the input is Shape with strides
/// InS (all of it); each output element o (contiguous, NumOut of them, at kept
/// index positions with strides KeptS over KeptShape) reduces the elements at
/// o's base plus the reduced index space RedShape with strides RedS.
/// InnerKept says adjacent outputs are adjacent in the input: threads then
/// take outputs, each summing a part of the reduced elements into Work
/// (reduceWorkDoubles of them), and the parts are added in order.
enum class ReduceOp : int { Sum, Mean, Max, Min, L1, L2, SumSquare, LogSum };
cudaError_t reduce(ReduceOp Op, DType XT, const void *X, DType YT, void *Y,
                   const Dims &KeptShape, const Strides &KeptS,
                   const Dims &RedShape, const Strides &RedS, bool InnerKept,
                   double *Work, cudaStream_t Stream);
int64_t reduceWorkDoubles(int64_t NumOut, int64_t Count, bool InnerKept);

/// Gather along an axis: X viewed as [Outer, Len, Inner] (Inner in bytes),
/// Count indices (i64 or i32). A bad index sets *ErrorWord to Code.
cudaError_t gather(const void *X, const void *Indices, bool I64, void *Y,
                   int64_t Outer, int64_t Len, int64_t Count,
                   int64_t InnerBytes, int *ErrorWord, int Code,
                   cudaStream_t Stream);
/// dData (f32, zeroed here) += dY rows at their indices (atomics: the sum
/// order is not fixed).
cudaError_t gatherGrad(const void *Indices, bool I64, DType DYT, const void *DY,
                       float *DData, int64_t Outer, int64_t Len, int64_t Count,
                       int64_t Inner, int *ErrorWord, int Code,
                       cudaStream_t Stream);

/// Cross-entropy over Rows rows of Classes logits; labels i64 or i32.
/// Loss (a scalar of type LossT) is the sum, or the mean over counted rows.
/// Work holds Rows doubles. A bad label sets *ErrorWord to Code.
cudaError_t crossEntropy(DType ZT, const void *Z, const void *Labels, bool I64,
                         DType LossT, void *Loss, int64_t Rows, int64_t Classes,
                         int64_t Ignore, bool Mean, double *Work,
                         int *ErrorWord, int Code, cudaStream_t Stream);
/// dZ = dLoss * (softmax(Z) - onehot(label)) [/ counted rows], dLoss a
/// scalar of type DLossT. Work holds one double.
cudaError_t crossEntropyGrad(DType DLossT, const void *DLoss, DType ZT,
                             const void *Z, const void *Labels, bool I64,
                             DType DZT, void *DZ, int64_t Rows, int64_t Classes,
                             int64_t Ignore, bool Mean, double *Work,
                             int *ErrorWord, int Code, cudaStream_t Stream);

// Ops split over a mesh axis (ShardedKernels.cu; CudaShardedOps.cpp runs
// the collectives between the steps).
/// Gather (axis 0) from a table of which this rank holds rows [Offset,
/// Offset + Rows) of Total: other rows give zeros. An index outside
/// [0, Total) sets *ErrorWord to Code.
cudaError_t shardedGather(const void *X, const void *Indices, bool I64, void *Y,
                          int64_t Rows, int64_t Offset, int64_t Total,
                          int64_t Count, int64_t InnerBytes, int *ErrorWord,
                          int Code, cudaStream_t Stream);
/// dData (f32, Rows x Inner, zeroed here) += the dY rows of indices this
/// rank holds (atomics: the sum order is not fixed).
cudaError_t shardedGatherGrad(const void *Indices, bool I64, DType DYT,
                              const void *DY, float *DData, int64_t Rows,
                              int64_t Offset, int64_t Count, int64_t Inner,
                              cudaStream_t Stream);
/// The vocabulary-parallel cross-entropy over Rows rows of this rank's
/// Classes logits (classes [Offset, Offset + Classes) of Total): each
/// row's block maximum; the global maxima from the gathered ones
/// (AllMax[p * Rows + r]); the block's sums of exponentials and target
/// logits (Sums: 2 x Rows, to be all-reduced); then the loss (Counted: one
/// double, the rows not ignored) or its gradient.
cudaError_t vocabBlockMax(DType ZT, const void *Z, int64_t Rows,
                          int64_t Classes, float *Max, cudaStream_t Stream);
cudaError_t vocabCombineMax(const float *AllMax, int64_t Parts, int64_t Rows,
                            float *Max, cudaStream_t Stream);
cudaError_t vocabBlockSums(DType ZT, const void *Z, const void *Labels,
                           bool I64, int64_t Rows, int64_t Classes,
                           int64_t Offset, int64_t Total, int64_t Ignore,
                           const float *Max, float *Sums, int *ErrorWord,
                           int Code, cudaStream_t Stream);
cudaError_t vocabLoss(const float *Max, const float *Sums, const void *Labels,
                      bool I64, int64_t Rows, int64_t Ignore, bool Mean,
                      DType LossT, void *Loss, double *Counted,
                      cudaStream_t Stream);
cudaError_t vocabLossGrad(DType DLossT, const void *DLoss, DType ZT,
                          const void *Z, const void *Labels, bool I64,
                          int64_t Rows, int64_t Classes, int64_t Offset,
                          int64_t Ignore, bool Mean, const float *Max,
                          const float *Sums, double *Counted, DType DZT,
                          void *DZ, cudaStream_t Stream);

/// The optimizer's scalars: device pointers to f32 values.
struct AdamWScalars {
  const float *Lr, *Beta1, *Beta2, *Eps, *WeightDecay, *Step;
};
/// One AdamW step in place (P, M, V may be the outputs' buffers); N
/// elements of each.
cudaError_t adamw(DType PT, void *P, DType GT, const void *G, DType MT, void *M,
                  DType VT, void *V, int64_t N, const AdamWScalars &S,
                  cudaStream_t Stream);
/// P -= Lr * (G + Wd * P).
cudaError_t sgd(DType PT, void *P, DType GT, const void *G, int64_t N,
                const float *Lr, const float *WeightDecay, cudaStream_t Stream);

/// Attention's mask over the scores [B, Hq, Sq, T]: element strides per
/// dimension (0 where it broadcasts), positions j >= Len masked; Data null
/// for none. A bool mask (Bool) masks where false; a float one is added.
struct AttentionMask {
  DType T = DType::Bool;
  const void *Data = nullptr;
  int64_t StrideB = 0, StrideH = 0, StrideI = 0, StrideJ = 0, Len = 0;
};
/// Attention's shapes as the row kernels see them: Rows = B * Hq * Sq rows
/// of T keys; with Causal, key j > i + Past of query row i is masked.
struct AttentionRows {
  int64_t Hq = 0, Sq = 0, T = 0, Past = 0;
  bool Causal = false;
};
/// In place over the scaled scores S [B, Hq, Sq, T] of type ST: masks each
/// row and normalizes it (max in f32, the sum in f64); a row whose keys are
/// all masked becomes zeros.
cudaError_t attentionSoftmax(DType ST, void *S, int64_t Rows,
                             const AttentionRows &R, const AttentionMask &M,
                             cudaStream_t Stream);
/// In place over dP: dS = Scale * P * (dP - sum_j P_j dP_j) per row of Len
/// (the sum in f64).
cudaError_t attentionSoftmaxGrad(DType T, const void *P, void *DP, int64_t Rows,
                                 int64_t Len, float Scale, cudaStream_t Stream);

/// Attention's shapes for the flash kernels (FlashAttentionKernels.cu):
/// Q [B, Hq, Sq, D], K [B, Hkv, Skv, D], V [B, Hkv, Skv, Dv], Y and dY
/// [B, Hq, Sq, Dv], contiguous; query head h reads key/value head
/// h / (Hq / Hkv). With Causal, key j > i of query row i is masked.
/// With Dropout, the probabilities that multiply V are dropped as Drop (the
/// block of the [B, Hq, Sq, Skv] probabilities, DropoutMask.h) says, drawn
/// again in the gradient.
struct FlashShape {
  int64_t B = 0, Hq = 0, Hkv = 0, Sq = 0, Skv = 0, D = 0, Dv = 0;
  float Scale = 1;
  bool Causal = false;
  bool Dropout = false;
  DropoutBlock Drop;
};
/// The largest D and Dv the flash kernels take.
constexpr int64_t FlashMaxHeadDim = 256;
/// Y = softmax(Scale Q K^T, masked) V without the scores: key tiles in
/// shared memory, an online softmax in f32 per query row. Q, K, V and Y
/// are of type T. A row whose keys are all masked gives zeros. Lse (may be
/// null) gets each row's log-sum-exp of the scores (+inf for such a row),
/// B * Hq * Sq floats.
cudaError_t flashAttention(DType T, const void *Q, const void *K, const void *V,
                           const AttentionMask &M, const FlashShape &S, void *Y,
                           float *Lse, cudaStream_t Stream);
/// dQ, dK, dV of flashAttention from dY (all of type T), recomputing the
/// scores tile by tile: no atomics, the same bits on every run. Work holds
/// flashGradWorkFloats(S) floats (each query row's log-sum-exp and
/// dY . Y).
cudaError_t flashAttentionGrad(DType T, const void *DY, const void *Q,
                               const void *K, const void *V,
                               const AttentionMask &M, const FlashShape &S,
                               void *DQ, void *DK, void *DV, float *Work,
                               cudaStream_t Stream);
int64_t flashGradWorkFloats(const FlashShape &S);

/// RotaryEmbedding's shapes: X [B, H, S, D], or [B, S, H * D] (ThreeD);
/// the first R entries of each head rotate in pairs (j, j + R / 2), or
/// (2j, 2j + 1) when Interleaved, the rest are copied.
struct RotaryShape {
  int64_t B = 0, S = 0, H = 0, D = 0, R = 0;
  bool ThreeD = false, Interleaved = false;
};
/// Y = X rotated by the cos and sin rows (R / 2 entries, type CT) at
/// position Positions[b * S + s] (i64; an index outside [0, CacheRows)
/// sets ErrorWord to Code), or at row b * S + s without positions.
cudaError_t rotaryEmbedding(DType XT, const void *X, DType CT, const void *Cos,
                            const void *Sin, const int64_t *Positions,
                            int64_t CacheRows, DType YT, void *Y,
                            const RotaryShape &Shape, int *ErrorWord, int Code,
                            cudaStream_t Stream);

/// Throughput probes for bench/: a kernel that streams N floats from X to
/// Y (Y = X * 2), for measuring memory bandwidth.
cudaError_t streamCopy(const float *X, float *Y, int64_t N,
                       cudaStream_t Stream);

} // namespace cuda
} // namespace autopar

#endif // AUTOPAR_RUNTIME_CUDA_CUDAKERNELS_H
