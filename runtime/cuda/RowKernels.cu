//===- RowKernels.cu - Softmax, norms, reductions, gathers, the loss ------===//
//
// Row-wise kernels: one thread block per row, statistics in f64 (as the
// CPU kernels keep them), block reductions in a fixed tree order, so every
// result is the same run after run. The column sums of the norms'
// gradients go through per-part partial sums (Work) added in part order.
// GatherGrad adds with atomics: its sums are not in a fixed order.
//
//===----------------------------------------------------------------------===//

#include "runtime/cuda/DeviceSupport.cuh"

#include <cmath>

namespace autopar {
namespace cuda {

namespace {

__global__ void softmaxKernel(DType XT, const void *X, DType YT, void *Y,
                              int64_t Len, int64_t Inner, bool Log) {
  __shared__ double Shared[32];
  __shared__ float SharedF[32];
  int64_t Row = blockIdx.x;
  int64_t Base = Row / Inner * Len * Inner + Row % Inner;
  float Max = -INFINITY;
  for (int64_t J = threadIdx.x; J < Len; J += blockDim.x)
    Max = fmaxf(Max, loadF(XT, X, Base + J * Inner));
  Max = blockMax(Max, SharedF);
  double Sum = 0;
  for (int64_t J = threadIdx.x; J < Len; J += blockDim.x)
    Sum += exp(double(loadF(XT, X, Base + J * Inner)) - Max);
  Sum = blockSum(Sum, Shared);
  double LogSum = log(Sum);
  for (int64_t J = threadIdx.x; J < Len; J += blockDim.x) {
    double Shifted = double(loadF(XT, X, Base + J * Inner)) - Max;
    storeF(YT, Y, Base + J * Inner,
           float(Log ? Shifted - LogSum : exp(Shifted) / Sum));
  }
}

__global__ void softmaxGradKernel(DType T, const void *DY, const void *Y,
                                  void *DX, int64_t Len, int64_t Inner) {
  __shared__ double Shared[32];
  int64_t Row = blockIdx.x;
  int64_t Base = Row / Inner * Len * Inner + Row % Inner;
  double Dot = 0;
  for (int64_t J = threadIdx.x; J < Len; J += blockDim.x) {
    int64_t At = Base + J * Inner;
    Dot += double(loadF(T, DY, At)) * loadF(T, Y, At);
  }
  Dot = blockSum(Dot, Shared);
  for (int64_t J = threadIdx.x; J < Len; J += blockDim.x) {
    int64_t At = Base + J * Inner;
    storeF(T, DX, At, float(loadF(T, Y, At) * (loadF(T, DY, At) - Dot)));
  }
}

/// A row's mean (0 unless Centered) and 1 / sqrt(variance + epsilon).
__device__ void rowStats(bool Centered, DType XT, const void *X, int64_t Base,
                         int64_t Len, double Epsilon, double *Shared,
                         double &Mean, double &Inv) {
  Mean = 0;
  if (Centered) {
    double Sum = 0;
    for (int64_t J = threadIdx.x; J < Len; J += blockDim.x)
      Sum += loadF(XT, X, Base + J);
    Sum = blockSum(Sum, Shared);
    Mean = Len ? Sum / Len : 0;
  }
  double Square = 0;
  for (int64_t J = threadIdx.x; J < Len; J += blockDim.x) {
    double D = loadF(XT, X, Base + J) - Mean;
    Square += D * D;
  }
  Square = blockSum(Square, Shared);
  Inv = 1 / sqrt((Len ? Square / Len : 0) + Epsilon);
}

__global__ void normKernel(bool Centered, DType XT, const void *X, DType ST,
                           const void *Scale, const void *Bias, DType YT,
                           void *Y, DType StatT, void *MeanOut, void *InvOut,
                           int64_t Len, double Epsilon) {
  __shared__ double Shared[32];
  int64_t Row = blockIdx.x, Base = Row * Len;
  double Mean, Inv;
  rowStats(Centered, XT, X, Base, Len, Epsilon, Shared, Mean, Inv);
  for (int64_t J = threadIdx.x; J < Len; J += blockDim.x) {
    double V = (loadF(XT, X, Base + J) - Mean) * Inv * loadF(ST, Scale, J);
    if (Bias)
      V += loadF(ST, Bias, J);
    storeF(YT, Y, Base + J, float(V));
  }
  if (threadIdx.x == 0) {
    if (MeanOut)
      storeF(StatT, MeanOut, Row, float(Mean));
    if (InvOut)
      storeF(StatT, InvOut, Row, float(Inv));
  }
}

/// dX per row; the row's mean and inverse deviation into Stats[2 Row ..].
__global__ void normGradRowKernel(bool Centered, DType T, const void *DY,
                                  const void *X, DType ST, const void *Scale,
                                  void *DX, int64_t Len, double Epsilon,
                                  double *Stats) {
  __shared__ double Shared[32];
  int64_t Row = blockIdx.x, Base = Row * Len;
  double Mean, Inv;
  rowStats(Centered, T, X, Base, Len, Epsilon, Shared, Mean, Inv);
  double SumG = 0, SumGX = 0;
  for (int64_t J = threadIdx.x; J < Len; J += blockDim.x) {
    double G = double(loadF(T, DY, Base + J)) * loadF(ST, Scale, J);
    SumG += G;
    SumGX += G * (loadF(T, X, Base + J) - Mean) * Inv;
  }
  SumG = blockSum(SumG, Shared);
  SumGX = blockSum(SumGX, Shared);
  double MeanG = Centered && Len ? SumG / Len : 0;
  double MeanGX = Len ? SumGX / Len : 0;
  for (int64_t J = threadIdx.x; J < Len; J += blockDim.x) {
    double G = double(loadF(T, DY, Base + J)) * loadF(ST, Scale, J);
    double XHat = (loadF(T, X, Base + J) - Mean) * Inv;
    storeF(T, DX, Base + J, float(Inv * (G - MeanG - XHat * MeanGX)));
  }
  if (threadIdx.x == 0) {
    Stats[2 * Row] = Mean;
    Stats[2 * Row + 1] = Inv;
  }
}

constexpr int64_t RowsPerPart = 64;

/// Partial column sums of dY * xhat and dY over one part of the rows.
__global__ void normGradPartKernel(DType T, const void *DY, const void *X,
                                   int64_t Rows, int64_t Len,
                                   const double *Stats, double *PartScale,
                                   double *PartBias) {
  int64_t J = int64_t(blockIdx.x) * blockDim.x + threadIdx.x;
  if (J >= Len)
    return;
  int64_t Part = blockIdx.y, Begin = Part * RowsPerPart;
  int64_t End = Begin + RowsPerPart < Rows ? Begin + RowsPerPart : Rows;
  double S = 0, B = 0;
  for (int64_t R = Begin; R < End; ++R) {
    double Up = loadF(T, DY, R * Len + J);
    S += Up * (loadF(T, X, R * Len + J) - Stats[2 * R]) * Stats[2 * R + 1];
    B += Up;
  }
  PartScale[Part * Len + J] = S;
  PartBias[Part * Len + J] = B;
}

__global__ void normGradSumKernel(int64_t Parts, int64_t Len,
                                  const double *PartScale,
                                  const double *PartBias, DType ST,
                                  void *DScale, void *DBias) {
  GRID_STRIDE(J, Len) {
    double S = 0, B = 0;
    for (int64_t P = 0; P < Parts; ++P) {
      S += PartScale[P * Len + J];
      B += PartBias[P * Len + J];
    }
    if (DScale)
      storeF(ST, DScale, J, float(S));
    if (DBias)
      storeF(ST, DBias, J, float(B));
  }
}

/// Max, and Min as the maximum of the negated elements.
__device__ bool takesMax(ReduceOp Op) {
  return Op == ReduceOp::Max || Op == ReduceOp::Min;
}

__device__ double initialAcc(ReduceOp Op) {
  return takesMax(Op) ? -INFINITY : 0.0;
}

/// An element as the reduction combines it.
__device__ double loadReduced(ReduceOp Op, DType XT, const void *X, int64_t I) {
  double V = loadF(XT, X, I);
  switch (Op) {
  case ReduceOp::Min:
    return -V;
  case ReduceOp::L1:
    return fabs(V);
  case ReduceOp::L2:
  case ReduceOp::SumSquare:
    return V * V;
  case ReduceOp::Sum:
  case ReduceOp::Mean:
  case ReduceOp::Max:
  case ReduceOp::LogSum:
    return V;
  }
  return V;
}

__device__ void storeReduced(ReduceOp Op, DType YT, void *Y, int64_t I,
                             double Acc, int64_t Count) {
  if (Op == ReduceOp::Mean)
    Acc = Count ? Acc / double(Count) : 0.0;
  else if (Op == ReduceOp::Min)
    Acc = -Acc;
  else if (Op == ReduceOp::L2)
    Acc = sqrt(Acc);
  else if (Op == ReduceOp::LogSum)
    Acc = log(Acc);
  storeF(YT, Y, I, float(Acc));
}

__device__ double combine(ReduceOp Op, double Acc, double V) {
  if (!takesMax(Op))
    return Acc + V;
  return (V > Acc || isnan(V)) ? V : Acc;
}

/// One thread per output element (when adjacent outputs are adjacent in
/// the input, so the loads coalesce).
__global__ void reduceThreadKernel(ReduceOp Op, DType XT, const void *X,
                                   DType YT, void *Y, Dims Kept, Strides KS,
                                   Dims Red, Strides RS, int64_t NumOut,
                                   int64_t Count) {
  GRID_STRIDE(O, NumOut) {
    int64_t Base = offsetOf(O, Kept, KS);
    double Acc = initialAcc(Op);
    for (int64_t R = 0; R < Count; ++R)
      Acc =
          combine(Op, Acc, loadReduced(Op, XT, X, Base + offsetOf(R, Red, RS)));
    storeReduced(Op, YT, Y, O, Acc, Count);
  }
}

constexpr int64_t ReducePart = 64;

int64_t reduceParts(int64_t Count) {
  int64_t Parts = (Count + ReducePart - 1) / ReducePart;
  return Parts < 1 ? 1 : Parts > 65535 ? 65535 : Parts;
}

/// Part blockIdx.y of the reduced elements of each output, into Work.
__global__ void reducePartKernel(ReduceOp Op, DType XT, const void *X,
                                 Dims Kept, Strides KS, Dims Red, Strides RS,
                                 int64_t NumOut, int64_t Count, int64_t Parts,
                                 double *Work) {
  int64_t O = int64_t(blockIdx.x) * blockDim.x + threadIdx.x;
  if (O >= NumOut)
    return;
  int64_t Per = (Count + Parts - 1) / Parts, Begin = blockIdx.y * Per;
  int64_t End = Begin + Per < Count ? Begin + Per : Count;
  int64_t Base = offsetOf(O, Kept, KS);
  double Acc = initialAcc(Op);
  for (int64_t R = Begin; R < End; ++R)
    Acc = combine(Op, Acc, loadReduced(Op, XT, X, Base + offsetOf(R, Red, RS)));
  Work[blockIdx.y * NumOut + O] = Acc;
}

__global__ void reducePartsKernel(ReduceOp Op, const double *Work,
                                  int64_t Parts, DType YT, void *Y,
                                  int64_t NumOut, int64_t Count) {
  GRID_STRIDE(O, NumOut) {
    double Acc = initialAcc(Op);
    for (int64_t P = 0; P < Parts; ++P)
      Acc = combine(Op, Acc, Work[P * NumOut + O]);
    storeReduced(Op, YT, Y, O, Acc, Count);
  }
}

/// One block per output element.
__global__ void reduceBlockKernel(ReduceOp Op, DType XT, const void *X,
                                  DType YT, void *Y, Dims Kept, Strides KS,
                                  Dims Red, Strides RS, int64_t Count) {
  __shared__ double Shared[32];
  int64_t O = blockIdx.x;
  int64_t Base = offsetOf(O, Kept, KS);
  double Acc = initialAcc(Op);
  for (int64_t R = threadIdx.x; R < Count; R += blockDim.x)
    Acc = combine(Op, Acc, loadReduced(Op, XT, X, Base + offsetOf(R, Red, RS)));
  Acc = takesMax(Op) ? blockMax(Acc, Shared) : blockSum(Acc, Shared);
  if (threadIdx.x == 0)
    storeReduced(Op, YT, Y, O, Acc, Count);
}

/// Y[o, k, :] = X[o, idx[k], :] in units of T.
template <typename T>
__global__ void gatherKernel(const T *X, const void *Indices, bool I64, T *Y,
                             int64_t Outer, int64_t Len, int64_t Count,
                             int64_t Inner, int *ErrorWord, int Code) {
  int64_t N = Outer * Count * Inner;
  GRID_STRIDE(I, N) {
    int64_t J = I % Inner, K = I / Inner % Count, O = I / Inner / Count;
    int64_t Index = loadIndex(Indices, I64, K);
    if (Index < -Len || Index >= Len) {
      reportError(ErrorWord, Code);
      continue;
    }
    if (Index < 0)
      Index += Len;
    Y[I] = X[(O * Len + Index) * Inner + J];
  }
}

__global__ void gatherGradKernel(const void *Indices, bool I64, DType DYT,
                                 const void *DY, float *DData, int64_t Outer,
                                 int64_t Len, int64_t Count, int64_t Inner,
                                 int *ErrorWord, int Code) {
  int64_t N = Outer * Count * Inner;
  GRID_STRIDE(I, N) {
    int64_t J = I % Inner, K = I / Inner % Count, O = I / Inner / Count;
    int64_t Index = loadIndex(Indices, I64, K);
    if (Index < 0)
      Index += Len;
    if (Index < 0 || Index >= Len) {
      reportError(ErrorWord, Code);
      continue;
    }
    atomicAdd(DData + (O * Len + Index) * Inner + J, loadF(DYT, DY, I));
  }
}

/// Row's maximum and log of the sum of exp(z - max), in every thread.
__device__ void logSumExp(DType ZT, const void *Z, int64_t Base,
                          int64_t Classes, double *Shared, float *SharedF,
                          double &Max, double &Log) {
  float M = -INFINITY;
  for (int64_t J = threadIdx.x; J < Classes; J += blockDim.x)
    M = fmaxf(M, loadF(ZT, Z, Base + J));
  M = blockMax(M, SharedF);
  double Sum = 0;
  for (int64_t J = threadIdx.x; J < Classes; J += blockDim.x)
    Sum += exp(double(loadF(ZT, Z, Base + J)) - M);
  Sum = blockSum(Sum, Shared);
  Max = M;
  Log = log(Sum);
}

__global__ void crossEntropyRowKernel(DType ZT, const void *Z,
                                      const void *Labels, bool I64,
                                      int64_t Classes, int64_t Ignore,
                                      double *RowLoss, int *ErrorWord,
                                      int Code) {
  __shared__ double Shared[32];
  __shared__ float SharedF[32];
  int64_t Row = blockIdx.x;
  int64_t L = loadIndex(Labels, I64, Row);
  if (L == Ignore || L < 0 || L >= Classes) {
    if (L != Ignore)
      reportError(ErrorWord, Code);
    if (threadIdx.x == 0)
      RowLoss[Row] = 0;
    return;
  }
  double Max, Log;
  logSumExp(ZT, Z, Row * Classes, Classes, Shared, SharedF, Max, Log);
  if (threadIdx.x == 0)
    RowLoss[Row] = Max + Log - loadF(ZT, Z, Row * Classes + L);
}

/// One block: the total of RowLoss and the count of counted rows.
__global__ void crossEntropyTotalKernel(const double *RowLoss,
                                        const void *Labels, bool I64,
                                        int64_t Rows, int64_t Ignore, bool Mean,
                                        DType LossT, void *Loss) {
  __shared__ double Shared[32];
  double Total = 0, Counted = 0;
  for (int64_t R = threadIdx.x; R < Rows; R += blockDim.x) {
    Total += RowLoss[R];
    Counted += loadIndex(Labels, I64, R) != Ignore;
  }
  Total = blockSum(Total, Shared);
  Counted = blockSum(Counted, Shared);
  if (threadIdx.x == 0)
    storeF(LossT, Loss, 0,
           float(Mean ? (Counted ? Total / Counted : 0.0) : Total));
}

__global__ void countLabelsKernel(const void *Labels, bool I64, int64_t Rows,
                                  int64_t Ignore, double *Counted) {
  __shared__ double Shared[32];
  double C = 0;
  for (int64_t R = threadIdx.x; R < Rows; R += blockDim.x)
    C += loadIndex(Labels, I64, R) != Ignore;
  C = blockSum(C, Shared);
  if (threadIdx.x == 0)
    *Counted = C;
}

__global__ void
crossEntropyGradKernel(DType DLossT, const void *DLoss, DType ZT, const void *Z,
                       const void *Labels, bool I64, DType DZT, void *DZ,
                       int64_t Classes, int64_t Ignore, bool Mean,
                       const double *Counted, int *ErrorWord, int Code) {
  __shared__ double Shared[32];
  __shared__ float SharedF[32];
  int64_t Row = blockIdx.x, Base = Row * Classes;
  int64_t L = loadIndex(Labels, I64, Row);
  if (L == Ignore || L < 0 || L >= Classes) {
    if (L != Ignore)
      reportError(ErrorWord, Code);
    zeroRow(DZT, DZ, Base, Classes);
    return;
  }
  double Max, Log;
  logSumExp(ZT, Z, Base, Classes, Shared, SharedF, Max, Log);
  writeCrossEntropyGradRow(DLossT, DLoss, Mean, Counted, ZT, Z, DZT, DZ, Base,
                           Classes, Max, Log, L);
}

} // namespace

cudaError_t softmax(DType XT, const void *X, DType YT, void *Y, int64_t Outer,
                    int64_t Len, int64_t Inner, bool Log, cudaStream_t Stream) {
  int64_t Rows = Outer * Inner;
  if (Rows == 0 || Len == 0)
    return cudaSuccess;
  if (Rows > MaxRows)
    return cudaErrorInvalidConfiguration;
  softmaxKernel<<<unsigned(Rows), rowThreads(Len), 0, Stream>>>(
      XT, X, YT, Y, Len, Inner, Log);
  return cudaGetLastError();
}

cudaError_t softmaxGrad(DType T, const void *DY, const void *Y, void *DX,
                        int64_t Outer, int64_t Len, int64_t Inner,
                        cudaStream_t Stream) {
  int64_t Rows = Outer * Inner;
  if (Rows == 0 || Len == 0)
    return cudaSuccess;
  if (Rows > MaxRows)
    return cudaErrorInvalidConfiguration;
  softmaxGradKernel<<<unsigned(Rows), rowThreads(Len), 0, Stream>>>(
      T, DY, Y, DX, Len, Inner);
  return cudaGetLastError();
}

cudaError_t norm(bool Centered, DType XT, const void *X, DType ST,
                 const void *Scale, const void *Bias, DType YT, void *Y,
                 DType StatT, void *Mean, void *InvStdDev, int64_t Rows,
                 int64_t Len, double Epsilon, cudaStream_t Stream) {
  if (Rows == 0)
    return cudaSuccess;
  if (Rows > MaxRows)
    return cudaErrorInvalidConfiguration;
  normKernel<<<unsigned(Rows), rowThreads(Len), 0, Stream>>>(
      Centered, XT, X, ST, Scale, Bias, YT, Y, StatT, Mean, InvStdDev, Len,
      Epsilon);
  return cudaGetLastError();
}

int64_t normGradWorkDoubles(int64_t Rows, int64_t Len) {
  int64_t Parts = (Rows + RowsPerPart - 1) / RowsPerPart;
  return 2 * Rows + 2 * Len * Parts;
}

cudaError_t normGrad(bool Centered, DType T, const void *DY, const void *X,
                     DType ST, const void *Scale, void *DX, void *DScale,
                     void *DBias, int64_t Rows, int64_t Len, double Epsilon,
                     double *Work, cudaStream_t Stream) {
  if (Rows > MaxRows)
    return cudaErrorInvalidConfiguration;
  int64_t Parts = (Rows + RowsPerPart - 1) / RowsPerPart;
  if (Rows > 0) {
    normGradRowKernel<<<unsigned(Rows), rowThreads(Len), 0, Stream>>>(
        Centered, T, DY, X, ST, Scale, DX, Len, Epsilon, Work);
    if (cudaError_t E = cudaGetLastError())
      return E;
  }
  if (!DScale && !DBias)
    return cudaSuccess;
  if (Len == 0)
    return cudaSuccess;
  double *PartScale = Work + 2 * Rows, *PartBias = PartScale + Parts * Len;
  if (Parts > 0) {
    if (Parts > 65535)
      return cudaErrorInvalidConfiguration;
    dim3 Grid(unsigned((Len + Threads - 1) / Threads), unsigned(Parts));
    normGradPartKernel<<<Grid, Threads, 0, Stream>>>(T, DY, X, Rows, Len, Work,
                                                     PartScale, PartBias);
    if (cudaError_t E = cudaGetLastError())
      return E;
  }
  normGradSumKernel<<<gridFor(Len), Threads, 0, Stream>>>(
      Parts, Len, PartScale, PartBias, ST, DScale, DBias);
  return cudaGetLastError();
}

int64_t reduceWorkDoubles(int64_t NumOut, int64_t Count, bool InnerKept) {
  return InnerKept ? NumOut * reduceParts(Count) : 0;
}

cudaError_t reduce(ReduceOp Op, DType XT, const void *X, DType YT, void *Y,
                   const Dims &KeptShape, const Strides &KeptS,
                   const Dims &RedShape, const Strides &RedS, bool InnerKept,
                   double *Work, cudaStream_t Stream) {
  int64_t NumOut = 1, Count = 1;
  for (int D = 0; D < KeptShape.Rank; ++D)
    NumOut *= KeptShape.Size[D];
  for (int D = 0; D < RedShape.Rank; ++D)
    Count *= RedShape.Size[D];
  if (NumOut == 0)
    return cudaSuccess;
  if (InnerKept && Work) {
    int64_t Parts = reduceParts(Count);
    dim3 Grid(unsigned((NumOut + Threads - 1) / Threads), unsigned(Parts));
    reducePartKernel<<<Grid, Threads, 0, Stream>>>(Op, XT, X, KeptShape, KeptS,
                                                   RedShape, RedS, NumOut,
                                                   Count, Parts, Work);
    if (cudaError_t E = cudaGetLastError())
      return E;
    reducePartsKernel<<<gridFor(NumOut), Threads, 0, Stream>>>(
        Op, Work, Parts, YT, Y, NumOut, Count);
  } else if (InnerKept || NumOut > MaxRows)
    reduceThreadKernel<<<gridFor(NumOut), Threads, 0, Stream>>>(
        Op, XT, X, YT, Y, KeptShape, KeptS, RedShape, RedS, NumOut, Count);
  else
    reduceBlockKernel<<<unsigned(NumOut), rowThreads(Count), 0, Stream>>>(
        Op, XT, X, YT, Y, KeptShape, KeptS, RedShape, RedS, Count);
  return cudaGetLastError();
}

cudaError_t gather(const void *X, const void *Indices, bool I64, void *Y,
                   int64_t Outer, int64_t Len, int64_t Count,
                   int64_t InnerBytes, int *ErrorWord, int Code,
                   cudaStream_t Stream) {
  int64_t N = Outer * Count * InnerBytes;
  if (N == 0)
    return cudaSuccess;
  auto Launch = [&](auto *Unit) {
    using T = std::remove_pointer_t<decltype(Unit)>;
    int64_t Inner = InnerBytes / int64_t(sizeof(T));
    gatherKernel<T><<<gridFor(Outer * Count * Inner), Threads, 0, Stream>>>(
        static_cast<const T *>(X), Indices, I64, static_cast<T *>(Y), Outer,
        Len, Count, Inner, ErrorWord, Code);
  };
  launchByRowUnit(X, Y, InnerBytes, Launch);
  return cudaGetLastError();
}

cudaError_t gatherGrad(const void *Indices, bool I64, DType DYT, const void *DY,
                       float *DData, int64_t Outer, int64_t Len, int64_t Count,
                       int64_t Inner, int *ErrorWord, int Code,
                       cudaStream_t Stream) {
  if (cudaError_t E = cudaMemsetAsync(
          DData, 0, size_t(Outer * Len * Inner) * sizeof(float), Stream))
    return E;
  int64_t N = Outer * Count * Inner;
  if (N == 0)
    return cudaSuccess;
  gatherGradKernel<<<gridFor(N), Threads, 0, Stream>>>(
      Indices, I64, DYT, DY, DData, Outer, Len, Count, Inner, ErrorWord, Code);
  return cudaGetLastError();
}

cudaError_t crossEntropy(DType ZT, const void *Z, const void *Labels, bool I64,
                         DType LossT, void *Loss, int64_t Rows, int64_t Classes,
                         int64_t Ignore, bool Mean, double *Work,
                         int *ErrorWord, int Code, cudaStream_t Stream) {
  if (Rows > MaxRows)
    return cudaErrorInvalidConfiguration;
  if (Rows > 0) {
    crossEntropyRowKernel<<<unsigned(Rows), rowThreads(Classes), 0, Stream>>>(
        ZT, Z, Labels, I64, Classes, Ignore, Work, ErrorWord, Code);
    if (cudaError_t E = cudaGetLastError())
      return E;
  }
  crossEntropyTotalKernel<<<1, 1024, 0, Stream>>>(Work, Labels, I64, Rows,
                                                  Ignore, Mean, LossT, Loss);
  return cudaGetLastError();
}

cudaError_t crossEntropyGrad(DType DLossT, const void *DLoss, DType ZT,
                             const void *Z, const void *Labels, bool I64,
                             DType DZT, void *DZ, int64_t Rows, int64_t Classes,
                             int64_t Ignore, bool Mean, double *Work,
                             int *ErrorWord, int Code, cudaStream_t Stream) {
  if (Rows > MaxRows)
    return cudaErrorInvalidConfiguration;
  if (Rows == 0)
    return cudaSuccess;
  countLabelsKernel<<<1, 1024, 0, Stream>>>(Labels, I64, Rows, Ignore, Work);
  if (cudaError_t E = cudaGetLastError())
    return E;
  crossEntropyGradKernel<<<unsigned(Rows), rowThreads(Classes), 0, Stream>>>(
      DLossT, DLoss, ZT, Z, Labels, I64, DZT, DZ, Classes, Ignore, Mean, Work,
      ErrorWord, Code);
  return cudaGetLastError();
}

} // namespace cuda
} // namespace autopar
