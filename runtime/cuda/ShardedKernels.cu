//===- ShardedKernels.cu - Vocabulary-parallel gathers and loss -----------===//
//
// The device halves of the ops split over a mesh axis (CudaShardedOps.cpp
// runs the collectives between them), with the CPU kernels' semantics
// (runtime/cpu/ShardedKernels.cpp):
//   - a Gather of a table whose rows [Offset, Offset + Rows) this rank
//     holds: rows of other ranks give zeros (the all-reduce that follows
//     sums the blocks); its gradient adds dY rows into this rank's rows;
//   - Megatron-LM's vocabulary-parallel cross-entropy (Shoeybi et al. 2019,
//     sec. 3): per row, this block's maximum; then, with the global maximum,
//     this block's sum of exp(z - max) and the target logit where the label
//     falls in the block; then the loss or its gradient from the all-reduced
//     sums. Sums of a row are in f64, as the CPU kernel's.
//
//===----------------------------------------------------------------------===//

#include "runtime/cuda/DeviceSupport.cuh"

#include <type_traits>

namespace autopar {
namespace cuda {

namespace {

/// Y[k, :] = X[idx[k] - Offset, :] when this rank holds row idx[k], else 0
/// (in units of T; Inner of them per row).
template <typename T>
__global__ void shardedGatherKernel(const T *X, const void *Indices, bool I64,
                                    T *Y, int64_t Rows, int64_t Offset,
                                    int64_t Total, int64_t Count, int64_t Inner,
                                    int *ErrorWord, int Code) {
  GRID_STRIDE(I, Count * Inner) {
    int64_t J = I % Inner, K = I / Inner;
    int64_t Index = loadIndex(Indices, I64, K);
    if (Index < 0 || Index >= Total) {
      reportError(ErrorWord, Code);
      Y[I] = T{};
      continue;
    }
    int64_t Local = Index - Offset;
    Y[I] = Local >= 0 && Local < Rows ? X[Local * Inner + J] : T{};
  }
}

__global__ void shardedGatherGradKernel(const void *Indices, bool I64,
                                        DType DYT, const void *DY, float *DData,
                                        int64_t Rows, int64_t Offset,
                                        int64_t Count, int64_t Inner) {
  GRID_STRIDE(I, Count * Inner) {
    int64_t J = I % Inner, K = I / Inner;
    int64_t Local = loadIndex(Indices, I64, K) - Offset;
    if (Local >= 0 && Local < Rows)
      atomicAdd(DData + Local * Inner + J, loadF(DYT, DY, I));
  }
}

/// Max[r]: the largest logit of row r in this block.
__global__ void blockMaxKernel(DType ZT, const void *Z, int64_t Classes,
                               float *Max) {
  __shared__ float Shared[32];
  int64_t Base = int64_t(blockIdx.x) * Classes;
  float M = -INFINITY;
  for (int64_t J = threadIdx.x; J < Classes; J += blockDim.x)
    M = fmaxf(M, loadF(ZT, Z, Base + J));
  M = blockMax(M, Shared);
  if (threadIdx.x == 0)
    Max[blockIdx.x] = M;
}

/// Max[r] = the largest of the Parts blocks' maxima AllMax[p * Rows + r].
__global__ void combineMaxKernel(const float *AllMax, int64_t Parts,
                                 int64_t Rows, float *Max) {
  GRID_STRIDE(R, Rows) {
    float M = -INFINITY;
    for (int64_t P = 0; P != Parts; ++P)
      M = fmaxf(M, AllMax[P * Rows + R]);
    Max[R] = M;
  }
}

/// Sums[r] = sum_j exp(z_rj - Max[r]) over this block; Sums[Rows + r] the
/// target logit when the label falls in the block (else 0). Labels outside
/// [0, Total) other than Ignore set the error word.
__global__ void blockSumsKernel(DType ZT, const void *Z, const void *Labels,
                                bool I64, int64_t Rows, int64_t Classes,
                                int64_t Offset, int64_t Total, int64_t Ignore,
                                const float *Max, float *Sums, int *ErrorWord,
                                int Code) {
  __shared__ double Shared[32];
  int64_t Row = blockIdx.x, Base = Row * Classes;
  double Sum = 0;
  for (int64_t J = threadIdx.x; J < Classes; J += blockDim.x)
    Sum += exp(double(loadF(ZT, Z, Base + J)) - Max[Row]);
  Sum = blockSum(Sum, Shared);
  if (threadIdx.x != 0)
    return;
  Sums[Row] = float(Sum);
  int64_t L = loadIndex(Labels, I64, Row);
  if (L != Ignore && (L < 0 || L >= Total))
    reportError(ErrorWord, Code);
  int64_t Local = L - Offset;
  Sums[Rows + Row] = L != Ignore && Local >= 0 && Local < Classes
                         ? loadF(ZT, Z, Base + Local)
                         : 0.0f;
}

/// One block: the loss from the global maxima and sums; Counted (one
/// double) gets the rows whose label is not Ignore.
__global__ void vocabLossKernel(const float *Max, const float *Sums,
                                const void *Labels, bool I64, int64_t Rows,
                                int64_t Ignore, bool Mean, DType LossT,
                                void *Loss, double *Counted) {
  __shared__ double Shared[32];
  double Total = 0, Count = 0;
  for (int64_t R = threadIdx.x; R < Rows; R += blockDim.x) {
    if (loadIndex(Labels, I64, R) == Ignore)
      continue;
    Total += double(Max[R]) + log(double(Sums[R])) - double(Sums[Rows + R]);
    Count += 1;
  }
  Total = blockSum(Total, Shared);
  Count = blockSum(Count, Shared);
  if (threadIdx.x != 0)
    return;
  if (Counted)
    *Counted = Count;
  if (Loss)
    storeF(LossT, Loss, 0, float(Mean ? (Count ? Total / Count : 0.0) : Total));
}

/// dZ = dLoss [/ counted] * (softmax(z) - onehot(label)) over this block.
__global__ void vocabLossGradKernel(DType DLossT, const void *DLoss, DType ZT,
                                    const void *Z, const void *Labels, bool I64,
                                    int64_t Rows, int64_t Classes,
                                    int64_t Offset, int64_t Ignore, bool Mean,
                                    const float *Max, const float *Sums,
                                    const double *Counted, DType DZT,
                                    void *DZ) {
  int64_t Row = blockIdx.x, Base = Row * Classes;
  int64_t L = loadIndex(Labels, I64, Row);
  if (L == Ignore) {
    zeroRow(DZT, DZ, Base, Classes);
    return;
  }
  writeCrossEntropyGradRow(DLossT, DLoss, Mean, Counted, ZT, Z, DZT, DZ, Base,
                           Classes, Max[Row], log(double(Sums[Row])),
                           L - Offset);
}

} // namespace

cudaError_t shardedGather(const void *X, const void *Indices, bool I64, void *Y,
                          int64_t Rows, int64_t Offset, int64_t Total,
                          int64_t Count, int64_t InnerBytes, int *ErrorWord,
                          int Code, cudaStream_t Stream) {
  if (Count * InnerBytes == 0)
    return cudaSuccess;
  auto Launch = [&](auto *Unit) {
    using T = std::remove_pointer_t<decltype(Unit)>;
    int64_t Inner = InnerBytes / int64_t(sizeof(T));
    shardedGatherKernel<T><<<gridFor(Count * Inner), Threads, 0, Stream>>>(
        static_cast<const T *>(X), Indices, I64, static_cast<T *>(Y), Rows,
        Offset, Total, Count, Inner, ErrorWord, Code);
  };
  launchByRowUnit(X, Y, InnerBytes, Launch);
  return cudaGetLastError();
}

cudaError_t shardedGatherGrad(const void *Indices, bool I64, DType DYT,
                              const void *DY, float *DData, int64_t Rows,
                              int64_t Offset, int64_t Count, int64_t Inner,
                              cudaStream_t Stream) {
  if (cudaError_t E = cudaMemsetAsync(
          DData, 0, size_t(Rows * Inner) * sizeof(float), Stream))
    return E;
  if (Count * Inner == 0)
    return cudaSuccess;
  shardedGatherGradKernel<<<gridFor(Count * Inner), Threads, 0, Stream>>>(
      Indices, I64, DYT, DY, DData, Rows, Offset, Count, Inner);
  return cudaGetLastError();
}

cudaError_t vocabBlockMax(DType ZT, const void *Z, int64_t Rows,
                          int64_t Classes, float *Max, cudaStream_t Stream) {
  if (Rows > MaxRows)
    return cudaErrorInvalidConfiguration;
  if (Rows == 0)
    return cudaSuccess;
  blockMaxKernel<<<unsigned(Rows), rowThreads(Classes), 0, Stream>>>(
      ZT, Z, Classes, Max);
  return cudaGetLastError();
}

cudaError_t vocabCombineMax(const float *AllMax, int64_t Parts, int64_t Rows,
                            float *Max, cudaStream_t Stream) {
  if (Rows == 0)
    return cudaSuccess;
  combineMaxKernel<<<gridFor(Rows), Threads, 0, Stream>>>(AllMax, Parts, Rows,
                                                          Max);
  return cudaGetLastError();
}

cudaError_t vocabBlockSums(DType ZT, const void *Z, const void *Labels,
                           bool I64, int64_t Rows, int64_t Classes,
                           int64_t Offset, int64_t Total, int64_t Ignore,
                           const float *Max, float *Sums, int *ErrorWord,
                           int Code, cudaStream_t Stream) {
  if (Rows > MaxRows)
    return cudaErrorInvalidConfiguration;
  if (Rows == 0)
    return cudaSuccess;
  blockSumsKernel<<<unsigned(Rows), rowThreads(Classes), 0, Stream>>>(
      ZT, Z, Labels, I64, Rows, Classes, Offset, Total, Ignore, Max, Sums,
      ErrorWord, Code);
  return cudaGetLastError();
}

cudaError_t vocabLoss(const float *Max, const float *Sums, const void *Labels,
                      bool I64, int64_t Rows, int64_t Ignore, bool Mean,
                      DType LossT, void *Loss, double *Counted,
                      cudaStream_t Stream) {
  vocabLossKernel<<<1, 1024, 0, Stream>>>(Max, Sums, Labels, I64, Rows, Ignore,
                                          Mean, LossT, Loss, Counted);
  return cudaGetLastError();
}

cudaError_t vocabLossGrad(DType DLossT, const void *DLoss, DType ZT,
                          const void *Z, const void *Labels, bool I64,
                          int64_t Rows, int64_t Classes, int64_t Offset,
                          int64_t Ignore, bool Mean, const float *Max,
                          const float *Sums, double *Counted, DType DZT,
                          void *DZ, cudaStream_t Stream) {
  if (Rows > MaxRows)
    return cudaErrorInvalidConfiguration;
  if (Rows == 0)
    return cudaSuccess;
  vocabLossKernel<<<1, 1024, 0, Stream>>>(Max, Sums, Labels, I64, Rows, Ignore,
                                          Mean, DType::F32, nullptr, Counted);
  if (cudaError_t E = cudaGetLastError())
    return E;
  vocabLossGradKernel<<<unsigned(Rows), rowThreads(Classes), 0, Stream>>>(
      DLossT, DLoss, ZT, Z, Labels, I64, Rows, Classes, Offset, Ignore, Mean,
      Max, Sums, Counted, DZT, DZ);
  return cudaGetLastError();
}

} // namespace cuda
} // namespace autopar
