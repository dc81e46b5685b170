//===- AttentionKernels.cu - Attention's softmax rows, rotary embedding ---===//
//
// The row-wise parts of attention with materialized scores (the products
// go through cuBLAS in CudaAttentionOps.cpp): each query row's mask and
// softmax, in place over the scores, and the softmax's gradient. One thread
// block per row, reductions in a fixed tree order (DeviceSupport.cuh), as
// RowKernels.cu's softmax keeps them. And RotaryEmbedding, one thread per
// output element (its gradient is the same op with the sine negated).
//
//===----------------------------------------------------------------------===//

#include "runtime/cuda/DeviceSupport.cuh"

#include <cmath>

namespace autopar {
namespace cuda {

namespace {

/// Score J of row (B, H, I), masked to -inf or with the float mask added.
__device__ __forceinline__ float maskedScore(DType ST, const void *S,
                                             int64_t Base, int64_t B, int64_t H,
                                             int64_t I, int64_t J,
                                             const AttentionRows &R,
                                             const AttentionMask &M) {
  if (R.Causal && J > I + R.Past)
    return -INFINITY;
  return maskScore(loadF(ST, S, Base + J), B, H, I, J, R.Past, R.Causal, M);
}

__global__ void attentionSoftmaxKernel(DType ST, void *S, AttentionRows R,
                                       AttentionMask M) {
  __shared__ double Shared[32];
  __shared__ float SharedF[32];
  int64_t Row = blockIdx.x;
  int64_t I = Row % R.Sq, BH = Row / R.Sq;
  int64_t B = BH / R.Hq, H = BH % R.Hq;
  int64_t Base = Row * R.T;
  float Max = -INFINITY;
  for (int64_t J = threadIdx.x; J < R.T; J += blockDim.x)
    Max = fmaxf(Max, maskedScore(ST, S, Base, B, H, I, J, R, M));
  Max = blockMax(Max, SharedF);
  if (Max == -INFINITY) {
    // Every key masked: zeros, as the CPU kernel gives.
    for (int64_t J = threadIdx.x; J < R.T; J += blockDim.x)
      storeF(ST, S, Base + J, 0.0f);
    return;
  }
  double Sum = 0;
  for (int64_t J = threadIdx.x; J < R.T; J += blockDim.x)
    Sum += exp(double(maskedScore(ST, S, Base, B, H, I, J, R, M)) - Max);
  Sum = blockSum(Sum, Shared);
  // Each thread rewrites only the elements it read.
  for (int64_t J = threadIdx.x; J < R.T; J += blockDim.x) {
    double X = double(maskedScore(ST, S, Base, B, H, I, J, R, M));
    storeF(ST, S, Base + J, float(exp(X - Max) / Sum));
  }
}

__global__ void attentionSoftmaxGradKernel(DType T, const void *P, void *DP,
                                           int64_t Len, float Scale) {
  __shared__ double Shared[32];
  int64_t Base = int64_t(blockIdx.x) * Len;
  double Dot = 0;
  for (int64_t J = threadIdx.x; J < Len; J += blockDim.x)
    Dot += double(loadF(T, P, Base + J)) * loadF(T, DP, Base + J);
  Dot = blockSum(Dot, Shared);
  for (int64_t J = threadIdx.x; J < Len; J += blockDim.x) {
    double PJ = loadF(T, P, Base + J);
    storeF(T, DP, Base + J,
           float(Scale * PJ * (double(loadF(T, DP, Base + J)) - Dot)));
  }
}

__global__ void rotaryKernel(DType XT, const void *X, DType CT, const void *Cos,
                             const void *Sin, const int64_t *Positions,
                             int64_t CacheRows, DType YT, void *Y,
                             RotaryShape Sh, int64_t N, int *ErrorWord,
                             int Code) {
  int64_t Half = Sh.R / 2;
  for (int64_t I = int64_t(blockIdx.x) * blockDim.x + threadIdx.x; I < N;
       I += int64_t(gridDim.x) * blockDim.x) {
    // A head's D entries are consecutive in both layouts: Rest indexes
    // [B, S, H] (3-D) or [B, H, S] rows of D.
    int64_t Dd = I % Sh.D, Rest = I / Sh.D, B, S;
    if (Sh.ThreeD) {
      S = Rest / Sh.H % Sh.S;
      B = Rest / Sh.H / Sh.S;
    } else {
      S = Rest % Sh.S;
      B = Rest / Sh.S / Sh.H;
    }
    int64_t Head = I - Dd;
    if (Dd >= Sh.R) {
      storeF(YT, Y, I, loadF(XT, X, I));
      continue;
    }
    int64_t Row = B * Sh.S + S;
    if (Positions) {
      Row = Positions[B * Sh.S + S];
      if (Row < 0 || Row >= CacheRows) {
        reportError(ErrorWord, Code);
        storeF(YT, Y, I, 0.0f);
        continue;
      }
    }
    // This element's pair (I1, I2) and its angle J.
    int64_t J, I1, I2;
    if (Sh.Interleaved) {
      J = Dd / 2;
      I1 = 2 * J;
      I2 = 2 * J + 1;
    } else {
      J = Dd < Half ? Dd : Dd - Half;
      I1 = J;
      I2 = J + Half;
    }
    float C = loadF(CT, Cos, Row * Half + J),
          Sn = loadF(CT, Sin, Row * Half + J);
    float X1 = loadF(XT, X, Head + I1), X2 = loadF(XT, X, Head + I2);
    storeF(YT, Y, I, Dd == I1 ? C * X1 - Sn * X2 : Sn * X1 + C * X2);
  }
}

} // namespace

cudaError_t rotaryEmbedding(DType XT, const void *X, DType CT, const void *Cos,
                            const void *Sin, const int64_t *Positions,
                            int64_t CacheRows, DType YT, void *Y,
                            const RotaryShape &Shape, int *ErrorWord, int Code,
                            cudaStream_t Stream) {
  int64_t N = Shape.B * Shape.S * Shape.H * Shape.D;
  if (N == 0)
    return cudaSuccess;
  rotaryKernel<<<gridFor(N), Threads, 0, Stream>>>(XT, X, CT, Cos, Sin,
                                                   Positions, CacheRows, YT, Y,
                                                   Shape, N, ErrorWord, Code);
  return cudaGetLastError();
}

cudaError_t attentionSoftmax(DType ST, void *S, int64_t Rows,
                             const AttentionRows &R, const AttentionMask &M,
                             cudaStream_t Stream) {
  if (Rows == 0 || R.T == 0)
    return cudaSuccess;
  if (Rows > MaxRows || R.Sq == 0 || R.Hq == 0)
    return cudaErrorInvalidConfiguration;
  attentionSoftmaxKernel<<<unsigned(Rows), rowThreads(R.T), 0, Stream>>>(ST, S,
                                                                         R, M);
  return cudaGetLastError();
}

cudaError_t attentionSoftmaxGrad(DType T, const void *P, void *DP, int64_t Rows,
                                 int64_t Len, float Scale,
                                 cudaStream_t Stream) {
  if (Rows == 0 || Len == 0)
    return cudaSuccess;
  if (Rows > MaxRows)
    return cudaErrorInvalidConfiguration;
  attentionSoftmaxGradKernel<<<unsigned(Rows), rowThreads(Len), 0, Stream>>>(
      T, P, DP, Len, Scale);
  return cudaGetLastError();
}

} // namespace cuda
} // namespace autopar
