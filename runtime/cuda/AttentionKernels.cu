//===- AttentionKernels.cu - Attention's softmax rows and their gradient --===//
//
// The row-wise parts of attention with materialized scores (the products
// go through cuBLAS in CudaAttentionOps.cpp): each query row's mask and
// softmax, in place over the scores, and the softmax's gradient. One thread
// block per row, reductions in a fixed tree order (DeviceSupport.cuh), as
// RowKernels.cu's softmax keeps them.
//
//===----------------------------------------------------------------------===//

#include "runtime/cuda/DeviceSupport.cuh"

#include <cmath>

namespace autopar {
namespace cuda {

namespace {

/// Threads for a row of Len elements: a multiple of 32, at most 1024.
unsigned attentionRowThreads(int64_t Len) {
  int64_t T = (Len + 31) / 32 * 32;
  return unsigned(T < 32 ? 32 : T > 1024 ? 1024 : T);
}

constexpr int64_t MaxRows = 2147483647;

/// Score J of row (B, H, I), masked to -inf or with the float mask added.
__device__ __forceinline__ float maskedScore(DType ST, const void *S,
                                             int64_t Base, int64_t B, int64_t H,
                                             int64_t I, int64_t J,
                                             const AttentionRows &R,
                                             const AttentionMask &M) {
  if (R.Causal && J > I + R.Past)
    return -INFINITY;
  float X = loadF(ST, S, Base + J);
  if (!M.Data)
    return X;
  if (J >= M.Len)
    return -INFINITY;
  int64_t At = B * M.StrideB + H * M.StrideH + I * M.StrideI + J * M.StrideJ;
  if (M.T == DType::Bool)
    return static_cast<const unsigned char *>(M.Data)[At] ? X : -INFINITY;
  return X + loadF(M.T, M.Data, At);
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

} // namespace

cudaError_t attentionSoftmax(DType ST, void *S, int64_t Rows,
                             const AttentionRows &R, const AttentionMask &M,
                             cudaStream_t Stream) {
  if (Rows == 0 || R.T == 0)
    return cudaSuccess;
  if (Rows > MaxRows || R.Sq == 0 || R.Hq == 0)
    return cudaErrorInvalidConfiguration;
  attentionSoftmaxKernel<<<unsigned(Rows), attentionRowThreads(R.T), 0,
                           Stream>>>(ST, S, R, M);
  return cudaGetLastError();
}

cudaError_t attentionSoftmaxGrad(DType T, const void *P, void *DP, int64_t Rows,
                                 int64_t Len, float Scale,
                                 cudaStream_t Stream) {
  if (Rows == 0 || Len == 0)
    return cudaSuccess;
  if (Rows > MaxRows)
    return cudaErrorInvalidConfiguration;
  attentionSoftmaxGradKernel<<<unsigned(Rows), attentionRowThreads(Len), 0,
                               Stream>>>(T, P, DP, Len, Scale);
  return cudaGetLastError();
}

} // namespace cuda
} // namespace autopar
