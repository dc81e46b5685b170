//===- FlashAttentionKernels.cu - Attention without its scores ------------===//
//
// Attention and its gradient without ever holding the [Sq, Skv] scores (the
// plan's `attention=flash` kernel): FlashAttention-2's online softmax (Dao
// 2023) over tiles of keys staged in shared memory, in f32 whatever the
// storage type. Shapes are CudaKernels.h's FlashShape. The query heads of a
// key/value head are consecutive, so the G = Hq / Hkv heads' Sq rows of one
// (batch, key/value head) are G * Sq consecutive rows of Q, Y and dY, its
// "group rows"; a block takes Warps of them (from two heads where a head
// ends inside the block) and every key/value tile it stages serves them all.
//
// Forward: a warp per query row. For each tile of Tile keys (the last one
// partial), lane l computes the score of key l (q . k in order, scaled,
// masked), the warp takes the tile's maximum and sum of exponentials with
// shuffles, rescales its running sum and output, and adds p_j v_j with
// lanes splitting Dv. The gradient's first pass is the same loop keeping
// each row's log-sum-exp and D_i = dY_i . O_i in scratch (O recomputed:
// AttentionGrad has no Y operand).
//
// Gradient: dQ, a warp per query row over the key tiles (p = exp(s - lse),
// dp = dY_i . v_j, ds = scale p (dp - D_i), dQ_i += ds k_j); dK and dV, a
// warp per key row over tiles of the query rows of every query head of its
// group, head by head (dV_j += p dY_i, dK_j += ds q_i). Each result element
// is one lane's sum in a fixed order: no atomics, the same bits every run.
//
// With dropout, the weights of V are the probabilities times the mask over
// 1 - ratio, each score's mask drawn from its index (DropoutMask.h) in the
// forward and again in the gradient: the running sum stays the undropped
// one, dp_j is dY_i . v_j times the same mask and scale, and D_i = dY_i .
// O_i is still sum_j p_j dp_j.
//
// Masks are the materialized kernel's (is_causal: key j > i; attn_mask with
// AttentionMask's strides, keys past its length masked); causal blocks skip
// the tiles no row of theirs sees. A row whose keys are all masked keeps a
// running maximum of -inf (its tiles are skipped, never exp(-inf - -inf)),
// gives zeros, and gets lse = +inf so that its probabilities in the
// gradient are exp(s - inf) = 0. D and Dv are at most FlashMaxHeadDim:
// each lane holds ceil(max(D, Dv) / 32) output elements in registers.
// Scratch is the gradient's 2 * B * Hq * Sq floats.
//
//===----------------------------------------------------------------------===//

#include "runtime/cuda/DeviceSupport.cuh"

#include <cmath>
#include <type_traits>

namespace autopar {
namespace cuda {

namespace {

/// Rows (one per warp) of a block, and rows of a staged tile (one per
/// lane).
constexpr int Warps = 16, Tile = 32;
constexpr unsigned BlockThreads = Warps * 32;
constexpr unsigned AllLanes = 0xffffffffu;

/// The largest shared memory a kernel takes without opting in.
constexpr size_t DefaultSharedBytes = 48 * 1024;

/// Rows [First, First + Rows) of Src (rows of Cols elements of type T) into
/// Dst as f32, Stride floats apart; the whole block copies.
__device__ __forceinline__ void stageRows(float *Dst, int Stride, DType T,
                                          const void *Src, int64_t First,
                                          int Rows, int Cols) {
  for (int X = threadIdx.x; X < Rows * Cols; X += blockDim.x) {
    int R = X / Cols, C = X % Cols;
    Dst[R * Stride + C] = loadF(T, Src, (First + R) * Cols + C);
  }
}

/// X . Y over N elements, in order.
__device__ __forceinline__ float dot(const float *X, const float *Y, int N) {
  float Sum = 0;
  for (int I = 0; I < N; ++I)
    Sum = fmaf(X[I], Y[I], Sum);
  return Sum;
}

/// Acc[E] += W * Row[C] for the entries C = Lane + 32 E < Cols this lane
/// holds of a row of output.
template <int PerLane>
__device__ __forceinline__ void addScaledRow(float (&Acc)[PerLane], float W,
                                             const float *Row, int Cols,
                                             int Lane) {
#pragma unroll
  for (int E = 0; E < PerLane; ++E) {
    int C = Lane + 32 * E;
    if (C < Cols)
      Acc[E] = fmaf(W, Row[C], Acc[E]);
  }
}

/// Out[Base + C] = Scale * Acc[E] for the entries this lane holds.
template <int PerLane>
__device__ __forceinline__ void storeRow(DType T, void *Out, int64_t Base,
                                         const float (&Acc)[PerLane], int Cols,
                                         int Lane, float Scale = 1) {
#pragma unroll
  for (int E = 0; E < PerLane; ++E) {
    int C = Lane + 32 * E;
    if (C < Cols)
      storeF(T, Out, Base + C, Acc[E] * Scale);
  }
}

/// W dropped as score (B, H, I, J) is: W times 1 / (1 - ratio) where its
/// mask keeps it, else 0; W itself without dropout.
__device__ __forceinline__ float dropWeight(const FlashShape &S, int64_t B,
                                            int64_t H, int64_t I, int64_t J,
                                            float W) {
  if (!S.Dropout)
    return W;
  uint64_t Index = S.Drop.rowStart((B * S.Hq + H) * S.Sq + I) + uint64_t(J);
  return S.Drop.Key.keeps(Index) ? W * S.Drop.Key.Scale : 0.0f;
}

/// A block of query rows: group rows [Row0, Row0 + Rows) of the (batch,
/// key/value head) BKh, and the one of this thread's warp.
struct QueryRows {
  int64_t BKh, GroupRows, Row0;
  int Rows;
  bool Active; // The warp has a row.
  int64_t Row; // Its row of Q, Y, dY and the statistics.
  int64_t B, H, I;

  __device__ QueryRows(const FlashShape &S) {
    int64_t G = S.Hq / S.Hkv;
    GroupRows = G * S.Sq;
    int64_t Blocks = (GroupRows + Warps - 1) / Warps;
    BKh = blockIdx.x / Blocks;
    Row0 = blockIdx.x % Blocks * Warps;
    Rows = int(min(int64_t(Warps), GroupRows - Row0));
    int Warp = threadIdx.x / 32;
    Active = Warp < Rows;
    int64_t R = Row0 + Warp;
    Row = BKh * GroupRows + R;
    B = BKh / S.Hkv;
    H = BKh % S.Hkv * G + R / S.Sq;
    I = R % S.Sq;
  }

  /// The keys any of the rows sees: with is_causal, row i sees [0, i].
  __device__ int64_t keyEnd(const FlashShape &S) const {
    if (!S.Causal)
      return S.Skv;
    int64_t Last = Row0 + Rows - 1;
    int64_t MaxI = Row0 / S.Sq == Last / S.Sq ? Last % S.Sq : S.Sq - 1;
    return min(S.Skv, MaxI + 1);
  }
};

/// The forward (Stats false: Y, and Lse when not null), or the gradient's
/// first pass (Stats: Lse and Delta = dY . O per row). Shared memory: K
/// [Tile][D + 1] (padded: lane l reads row l), V [Tile][Dv], Q [Warps][D].
template <int PerLane, bool Stats>
__global__ void __launch_bounds__(BlockThreads)
    flashForwardKernel(DType T, const void *Q, const void *K, const void *V,
                       AttentionMask M, FlashShape S, void *Y, const void *DY,
                       float *Lse, float *Delta) {
  extern __shared__ float Shared[];
  const int D = int(S.D), Dv = int(S.Dv);
  float *Ks = Shared;
  float *Vs = Ks + Tile * (D + 1);
  float *Qs = Vs + Tile * Dv;
  const int Warp = threadIdx.x / 32, Lane = threadIdx.x % 32;
  const QueryRows QR(S);
  stageRows(Qs, D, T, Q, QR.BKh * QR.GroupRows + QR.Row0, QR.Rows, D);
  const int64_t KeyEnd = QR.keyEnd(S);
  float Max = -INFINITY, Sum = 0, Acc[PerLane] = {};
  // Every thread runs every iteration (KeyEnd is the block's): the
  // barriers are reached by all, warps without a row included.
  for (int64_t J0 = 0; J0 < KeyEnd; J0 += Tile) {
    const int N = int(min(int64_t(Tile), KeyEnd - J0));
    // The previous tile's readers are done (the first time: Qs is staged).
    __syncthreads();
    stageRows(Ks, D + 1, T, K, QR.BKh * S.Skv + J0, N, D);
    stageRows(Vs, Dv, T, V, QR.BKh * S.Skv + J0, N, Dv);
    __syncthreads();
    if (!QR.Active)
      continue;
    float Score = -INFINITY;
    if (Lane < N)
      Score = maskScore(S.Scale * dot(Qs + Warp * D, Ks + Lane * (D + 1), D),
                        QR.B, QR.H, QR.I, J0 + Lane, 0, S.Causal, M);
    // The same in every lane: the branch keeps the warp together.
    const float NewMax = fmaxf(Max, warpMax(Score));
    if (NewMax == -INFINITY)
      continue; // Every key so far masked: nothing to add.
    // Masked keys and a first maximum of -inf give exp(-inf) = 0.
    const float P = expf(Score - NewMax), Rescale = expf(Max - NewMax);
    Sum = Sum * Rescale + warpSum(P);
    const float W =
        Lane < N ? dropWeight(S, QR.B, QR.H, QR.I, J0 + Lane, P) : 0.0f;
#pragma unroll
    for (int E = 0; E < PerLane; ++E)
      Acc[E] *= Rescale;
    for (int J = 0; J < N; ++J)
      addScaledRow(Acc, __shfl_sync(AllLanes, W, J), Vs + J * Dv, Dv, Lane);
    Max = NewMax;
  }
  if (!QR.Active)
    return;
  // Sum >= 1 once a key is unmasked (the maximum's term is 1); 0 gives
  // the all-masked row's zeros.
  const float Inv = Sum > 0 ? 1 / Sum : 0;
  const float RowLse = Sum > 0 ? Max + logf(Sum) : INFINITY;
  if (!Stats) {
    storeRow(T, Y, QR.Row * Dv, Acc, Dv, Lane, Inv);
    if (Lse && Lane == 0)
      Lse[QR.Row] = RowLse;
    return;
  }
  float Part = 0;
#pragma unroll
  for (int E = 0; E < PerLane; ++E) {
    int C = Lane + 32 * E;
    if (C < Dv)
      Part = fmaf(loadF(T, DY, QR.Row * Dv + C), Acc[E] * Inv, Part);
  }
  const float RowDelta = warpSum(Part);
  if (Lane == 0) {
    Lse[QR.Row] = RowLse;
    Delta[QR.Row] = RowDelta;
  }
}

/// dQ, a warp per query row. Shared memory: K [Tile][D + 1], V [Tile]
/// [Dv + 1] (padded: lane l reads row l of both), Q [Warps][D], dY
/// [Warps][Dv].
template <int PerLane>
__global__ void __launch_bounds__(BlockThreads)
    flashGradQueryKernel(DType T, const void *DY, const void *Q, const void *K,
                         const void *V, AttentionMask M, FlashShape S,
                         const float *Lse, const float *Delta, void *DQ) {
  extern __shared__ float Shared[];
  const int D = int(S.D), Dv = int(S.Dv);
  float *Ks = Shared;
  float *Vs = Ks + Tile * (D + 1);
  float *Qs = Vs + Tile * (Dv + 1);
  float *DYs = Qs + Warps * D;
  const int Warp = threadIdx.x / 32, Lane = threadIdx.x % 32;
  const QueryRows QR(S);
  const int64_t First = QR.BKh * QR.GroupRows + QR.Row0;
  stageRows(Qs, D, T, Q, First, QR.Rows, D);
  stageRows(DYs, Dv, T, DY, First, QR.Rows, Dv);
  const float RowLse = QR.Active ? Lse[QR.Row] : 0;
  const float RowDelta = QR.Active ? Delta[QR.Row] : 0;
  const int64_t KeyEnd = QR.keyEnd(S);
  float Acc[PerLane] = {};
  for (int64_t J0 = 0; J0 < KeyEnd; J0 += Tile) {
    const int N = int(min(int64_t(Tile), KeyEnd - J0));
    __syncthreads();
    stageRows(Ks, D + 1, T, K, QR.BKh * S.Skv + J0, N, D);
    stageRows(Vs, Dv + 1, T, V, QR.BKh * S.Skv + J0, N, Dv);
    __syncthreads();
    if (!QR.Active)
      continue;
    float DS = 0;
    if (Lane < N) {
      // The forward's score, bit for bit; lse = +inf gives P = 0.
      float Score =
          maskScore(S.Scale * dot(Qs + Warp * D, Ks + Lane * (D + 1), D), QR.B,
                    QR.H, QR.I, J0 + Lane, 0, S.Causal, M);
      float P = expf(Score - RowLse);
      float DP = dropWeight(S, QR.B, QR.H, QR.I, J0 + Lane,
                            dot(DYs + Warp * Dv, Vs + Lane * (Dv + 1), Dv));
      DS = S.Scale * P * (DP - RowDelta);
    }
    for (int J = 0; J < N; ++J)
      addScaledRow(Acc, __shfl_sync(AllLanes, DS, J), Ks + J * (D + 1), D,
                   Lane);
  }
  if (QR.Active)
    storeRow(T, DQ, QR.Row * D, Acc, D, Lane);
}

/// dK and dV, a warp per key row: a block takes Warps keys of one (batch,
/// key/value head) and the query rows of the group's heads in tiles.
/// Shared memory: Q [Tile][D + 1], dY [Tile][Dv + 1] (padded: lane l
/// reads row l), K [Warps][D], V [Warps][Dv], the tile's lse and D_i
/// [Tile] each.
template <int PerLane>
__global__ void __launch_bounds__(BlockThreads)
    flashGradKeyValueKernel(DType T, const void *DY, const void *Q,
                            const void *K, const void *V, AttentionMask M,
                            FlashShape S, const float *Lse, const float *Delta,
                            void *DK, void *DV) {
  extern __shared__ float Shared[];
  const int D = int(S.D), Dv = int(S.Dv);
  float *Qs = Shared;
  float *DYs = Qs + Tile * (D + 1);
  float *Ks = DYs + Tile * (Dv + 1);
  float *Vs = Ks + Warps * D;
  float *Lses = Vs + Warps * Dv;
  float *Deltas = Lses + Tile;
  const int Warp = threadIdx.x / 32, Lane = threadIdx.x % 32;
  const int64_t G = S.Hq / S.Hkv, GroupRows = G * S.Sq;
  const int64_t Blocks = (S.Skv + Warps - 1) / Warps;
  const int64_t BKh = blockIdx.x / Blocks, J0 = blockIdx.x % Blocks * Warps;
  const int Keys = int(min(int64_t(Warps), S.Skv - J0));
  const bool Active = Warp < Keys;
  const int64_t J = J0 + Warp, B = BKh / S.Hkv;
  stageRows(Ks, D, T, K, BKh * S.Skv + J0, Keys, D);
  stageRows(Vs, Dv, T, V, BKh * S.Skv + J0, Keys, Dv);
  float AccK[PerLane] = {}, AccV[PerLane] = {};
  // With is_causal, query rows i < J0 see none of the block's keys.
  const int64_t IBegin = S.Causal ? J0 : 0;
  // Both loops are the block's: every thread reaches every barrier.
  for (int64_t HG = 0; HG < G; ++HG) {
    const int64_t H = BKh % S.Hkv * G + HG;
    const int64_t HeadRow = BKh * GroupRows + HG * S.Sq; // Row (B, H, 0).
    for (int64_t I0 = IBegin; I0 < S.Sq; I0 += Tile) {
      const int N = int(min(int64_t(Tile), S.Sq - I0));
      __syncthreads(); // The previous tile's readers are done.
      stageRows(Qs, D + 1, T, Q, HeadRow + I0, N, D);
      stageRows(DYs, Dv + 1, T, DY, HeadRow + I0, N, Dv);
      for (int X = threadIdx.x; X < N; X += blockDim.x) {
        Lses[X] = Lse[HeadRow + I0 + X];
        Deltas[X] = Delta[HeadRow + I0 + X];
      }
      __syncthreads();
      if (!Active)
        continue;
      float P = 0, DS = 0;
      if (Lane < N) {
        // The forward's score of (row I0 + Lane, key J), bit for bit.
        float Score =
            maskScore(S.Scale * dot(Qs + Lane * (D + 1), Ks + Warp * D, D), B,
                      H, I0 + Lane, J, 0, S.Causal, M);
        P = expf(Score - Lses[Lane]);
        float DP = dropWeight(S, B, H, I0 + Lane, J,
                              dot(DYs + Lane * (Dv + 1), Vs + Warp * Dv, Dv));
        DS = S.Scale * P * (DP - Deltas[Lane]);
        P = dropWeight(S, B, H, I0 + Lane, J, P); // dV's weight.
      }
      for (int X = 0; X < N; ++X) {
        addScaledRow(AccV, __shfl_sync(AllLanes, P, X), DYs + X * (Dv + 1), Dv,
                     Lane);
        addScaledRow(AccK, __shfl_sync(AllLanes, DS, X), Qs + X * (D + 1), D,
                     Lane);
      }
    }
  }
  if (!Active)
    return;
  storeRow(T, DK, (BKh * S.Skv + J) * D, AccK, D, Lane);
  storeRow(T, DV, (BKh * S.Skv + J) * Dv, AccV, Dv, Lane);
}

/// Calls Launch with std::integral_constant<int, PerLane>: the output
/// elements per lane (1, 2, 4 or 8) that cover Dims.
template <typename LaunchFn>
cudaError_t byElementsPerLane(int64_t Dims, LaunchFn Launch) {
  if (Dims <= 32)
    return Launch(std::integral_constant<int, 1>());
  if (Dims <= 64)
    return Launch(std::integral_constant<int, 2>());
  if (Dims <= 128)
    return Launch(std::integral_constant<int, 4>());
  return Launch(std::integral_constant<int, 8>());
}

/// Lets Kernel take Bytes of dynamic shared memory.
template <typename KernelT>
cudaError_t allowShared(KernelT *Kernel, size_t Bytes) {
  if (Bytes <= DefaultSharedBytes)
    return cudaSuccess;
  return cudaFuncSetAttribute(
      Kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, int(Bytes));
}

/// Launches Kernel on Blocks blocks with Bytes of shared memory.
template <typename KernelT, typename... ArgTs>
cudaError_t launch(KernelT *Kernel, int64_t Blocks, size_t Bytes,
                   cudaStream_t Stream, ArgTs... Args) {
  if (Blocks == 0)
    return cudaSuccess;
  if (Blocks > MaxRows)
    return cudaErrorInvalidConfiguration;
  if (cudaError_t E = allowShared(Kernel, Bytes))
    return E;
  Kernel<<<unsigned(Blocks), BlockThreads, Bytes, Stream>>>(Args...);
  return cudaGetLastError();
}

bool isValid(const FlashShape &S) {
  return S.B >= 0 && S.Hkv > 0 && S.Hq % S.Hkv == 0 && S.Sq >= 0 &&
         S.Skv >= 0 && S.D > 0 && S.D <= FlashMaxHeadDim && S.Dv > 0 &&
         S.Dv <= FlashMaxHeadDim;
}

/// Blocks of query rows (Warps each, per (batch, key/value head)).
int64_t queryBlocks(const FlashShape &S) {
  return S.B * S.Hkv * ((S.Hq / S.Hkv * S.Sq + Warps - 1) / Warps);
}

size_t forwardShared(const FlashShape &S) {
  return sizeof(float) * size_t(Tile * (S.D + 1) + Tile * S.Dv + Warps * S.D);
}

size_t gradShared(const FlashShape &S) {
  return sizeof(float) * size_t(Tile * (S.D + 1) + Tile * (S.Dv + 1) +
                                Warps * (S.D + S.Dv) + 2 * Tile);
}

} // namespace

cudaError_t flashAttention(DType T, const void *Q, const void *K, const void *V,
                           const AttentionMask &M, const FlashShape &S, void *Y,
                           float *Lse, cudaStream_t Stream) {
  if (!isValid(S))
    return cudaErrorInvalidValue;
  return byElementsPerLane(S.Dv, [&](auto PerLane) {
    return launch(flashForwardKernel<decltype(PerLane)::value, false>,
                  queryBlocks(S), forwardShared(S), Stream, T, Q, K, V, M, S, Y,
                  static_cast<const void *>(nullptr), Lse,
                  static_cast<float *>(nullptr));
  });
}

int64_t flashGradWorkFloats(const FlashShape &S) {
  return 2 * S.B * S.Hq * S.Sq;
}

cudaError_t flashAttentionGrad(DType T, const void *DY, const void *Q,
                               const void *K, const void *V,
                               const AttentionMask &M, const FlashShape &S,
                               void *DQ, void *DK, void *DV, float *Work,
                               cudaStream_t Stream) {
  if (!isValid(S))
    return cudaErrorInvalidValue;
  float *Lse = Work, *Delta = Work + S.B * S.Hq * S.Sq;
  return byElementsPerLane(
      S.D > S.Dv ? S.D : S.Dv, [&](auto PerLane) -> cudaError_t {
        constexpr int N = decltype(PerLane)::value;
        if (cudaError_t E =
                launch(flashForwardKernel<N, true>, queryBlocks(S),
                       forwardShared(S), Stream, T, Q, K, V, M, S,
                       static_cast<void *>(nullptr), DY, Lse, Delta))
          return E;
        if (cudaError_t E = launch(flashGradQueryKernel<N>, queryBlocks(S),
                                   gradShared(S), Stream, T, DY, Q, K, V, M, S,
                                   static_cast<const float *>(Lse),
                                   static_cast<const float *>(Delta), DQ))
          return E;
        int64_t KeyBlocks = S.B * S.Hkv * ((S.Skv + Warps - 1) / Warps);
        return launch(flashGradKeyValueKernel<N>, KeyBlocks, gradShared(S),
                      Stream, T, DY, Q, K, V, M, S,
                      static_cast<const float *>(Lse),
                      static_cast<const float *>(Delta), DK, DV);
      });
}

} // namespace cuda
} // namespace autopar
