//===- DeviceSupport.cuh - What the CUDA kernels share ----------*- CUDA
//-*-===//
//
// Loads and stores of any storage type as f32 (or f64 and i64 for casts),
// grid sizes, index decomposition over a Dims, warp and block reductions,
// and attention's masks.
//
//===----------------------------------------------------------------------===//

#ifndef AUTOPAR_RUNTIME_CUDA_DEVICESUPPORT_CUH
#define AUTOPAR_RUNTIME_CUDA_DEVICESUPPORT_CUH

#include "runtime/cuda/CudaKernels.h"

#include <cuda_bf16.h>
#include <cuda_fp16.h>

#include <cmath>
#include <cstdint>

namespace autopar {
namespace cuda {

constexpr int Threads = 256;

/// A grid-stride loop over [0, N).
#define GRID_STRIDE(I, N)                                                      \
  for (int64_t I = int64_t(blockIdx.x) * blockDim.x + threadIdx.x; I < (N);    \
       I += int64_t(gridDim.x) * blockDim.x)

/// Threads for a row of Len elements: a multiple of 32, at most 1024.
inline unsigned rowThreads(int64_t Len) {
  int64_t T = (Len + 31) / 32 * 32;
  return unsigned(T < 32 ? 32 : T > 1024 ? 1024 : T);
}

/// Rows are blocks; grids hold up to 2^31 - 1 of them.
constexpr int64_t MaxRows = 2147483647;

/// Calls Launch with a null pointer to the widest unit (16, 8, 4, 2 or 1
/// bytes) that divides RowBytes, 16 only when X and Y are 16-byte aligned:
/// kernels that copy whole rows move them in that unit.
template <typename LaunchFn>
void launchByRowUnit(const void *X, const void *Y, int64_t RowBytes,
                     LaunchFn Launch) {
  bool Aligned16 = reinterpret_cast<uintptr_t>(X) % 16 == 0 &&
                   reinterpret_cast<uintptr_t>(Y) % 16 == 0;
  if (Aligned16 && RowBytes % 16 == 0)
    Launch(static_cast<uint4 *>(nullptr));
  else if (RowBytes % 8 == 0)
    Launch(static_cast<uint64_t *>(nullptr));
  else if (RowBytes % 4 == 0)
    Launch(static_cast<uint32_t *>(nullptr));
  else if (RowBytes % 2 == 0)
    Launch(static_cast<uint16_t *>(nullptr));
  else
    Launch(static_cast<uint8_t *>(nullptr));
}

/// Element K of an i64 or i32 index tensor.
__device__ __forceinline__ int64_t loadIndex(const void *Indices, bool I64,
                                             int64_t K) {
  return I64 ? static_cast<const int64_t *>(Indices)[K]
             : static_cast<const int32_t *>(Indices)[K];
}

/// Blocks for N elements with a grid-stride loop: enough to fill an H200
/// (132 SMs x 2048 threads / 256 = 1056 blocks) several times, no more.
inline unsigned gridFor(int64_t N) {
  int64_t Blocks = (N + Threads - 1) / Threads;
  if (Blocks < 1)
    Blocks = 1;
  return unsigned(Blocks > 8192 ? 8192 : Blocks);
}

__device__ __forceinline__ float loadF(DType T, const void *P, int64_t I) {
  switch (T) {
  case DType::F16:
    return __half2float(static_cast<const __half *>(P)[I]);
  case DType::BF16:
    return __bfloat162float(static_cast<const __nv_bfloat16 *>(P)[I]);
  case DType::F64:
    return float(static_cast<const double *>(P)[I]);
  default:
    return static_cast<const float *>(P)[I];
  }
}

__device__ __forceinline__ void storeF(DType T, void *P, int64_t I, float V) {
  switch (T) {
  case DType::F16:
    static_cast<__half *>(P)[I] = __float2half_rn(V);
    return;
  case DType::BF16:
    static_cast<__nv_bfloat16 *>(P)[I] = __float2bfloat16_rn(V);
    return;
  case DType::F64:
    static_cast<double *>(P)[I] = V;
    return;
  default:
    static_cast<float *>(P)[I] = V;
  }
}

/// The offset of flat index I of Shape under strides S.
__device__ __forceinline__ int64_t offsetOf(int64_t I, const Dims &Shape,
                                            const Strides &S) {
  int64_t Offset = 0;
  for (int D = Shape.Rank - 1; D >= 0; --D) {
    int64_t Size = Shape.Size[D];
    Offset += (I % Size) * S.S[D];
    I /= Size;
  }
  return Offset;
}

/// The offsets of flat index I of Shape under K operands' strides, with one
/// decomposition of I; IdxT is uint32_t when every index fits (32-bit
/// division is several times cheaper than 64-bit).
template <typename IdxT, int K>
__device__ __forceinline__ void offsetsOf(int64_t I, const Dims &Shape,
                                          const Strides *const (&S)[K],
                                          int64_t (&Out)[K]) {
  for (int O = 0; O < K; ++O)
    Out[O] = 0;
  IdxT J = IdxT(I);
  for (int D = Shape.Rank - 1; D >= 0; --D) {
    IdxT Size = IdxT(Shape.Size[D]);
    IdxT Q = J / Size;
    int64_t R = int64_t(J - Q * Size);
    for (int O = 0; O < K; ++O)
      Out[O] += R * S[O]->S[D];
    J = Q;
  }
}

/// The sum of V over the 32 lanes of a warp, all of which must call it.
/// A butterfly in a fixed order: every lane gets the same bits (each step
/// adds the same two values, in either order).
template <typename T> __device__ __forceinline__ T warpSum(T V) {
  for (int Off = 16; Off > 0; Off /= 2)
    V += __shfl_xor_sync(0xffffffffu, V, Off);
  return V;
}

/// The maximum of V over the warp's 32 lanes, as warpSum.
template <typename T> __device__ __forceinline__ T warpMax(T V) {
  for (int Off = 16; Off > 0; Off /= 2) {
    T Other = __shfl_xor_sync(0xffffffffu, V, Off);
    V = Other > V ? Other : V;
  }
  return V;
}

/// The sum of V over the block (blockDim.x a multiple of 32, at most
/// 1024); every thread gets it. Uses Shared[32].
template <typename T> __device__ __forceinline__ T blockSum(T V, T *Shared) {
  V = warpSum(V);
  int Lane = threadIdx.x % 32, Warp = threadIdx.x / 32;
  __syncthreads();
  if (Lane == 0)
    Shared[Warp] = V;
  __syncthreads();
  int Warps = blockDim.x / 32;
  T Total = Lane < Warps ? Shared[Lane] : T(0);
  for (int Off = 16; Off > 0; Off /= 2)
    Total += __shfl_xor_sync(0xffffffffu, Total, Off);
  return Total;
}

template <typename T> __device__ __forceinline__ T blockMax(T V, T *Shared) {
  V = warpMax(V);
  int Lane = threadIdx.x % 32, Warp = threadIdx.x / 32;
  __syncthreads();
  if (Lane == 0)
    Shared[Warp] = V;
  __syncthreads();
  int Warps = blockDim.x / 32;
  T Total = Lane < Warps ? Shared[Lane] : Shared[0];
  for (int Off = 16; Off > 0; Off /= 2) {
    T Other = __shfl_xor_sync(0xffffffffu, Total, Off);
    Total = Other > Total ? Other : Total;
  }
  return Total;
}

/// Attention score X of key J in query row I of (batch B, query head H)
/// under is_causal (key j > i + Past masked) and attn_mask M: -inf where
/// masked (a bool mask's false, j >= M.Len), else X plus a float mask.
__device__ __forceinline__ float maskScore(float X, int64_t B, int64_t H,
                                           int64_t I, int64_t J, int64_t Past,
                                           bool Causal,
                                           const AttentionMask &M) {
  if (Causal && J > I + Past)
    return -INFINITY;
  if (!M.Data)
    return X;
  if (J >= M.Len)
    return -INFINITY;
  int64_t At = B * M.StrideB + H * M.StrideH + I * M.StrideI + J * M.StrideJ;
  if (M.T == DType::Bool)
    return static_cast<const unsigned char *>(M.Data)[At] ? X : -INFINITY;
  return X + loadF(M.T, M.Data, At);
}

/// Records the first failure's code.
__device__ __forceinline__ void reportError(int *ErrorWord, int Code) {
  if (ErrorWord)
    atomicCAS(ErrorWord, 0, Code);
}

/// The cross-entropy's gradient over one row of Classes logits at Base,
/// the whole block: dZ = Scale (exp(z - Max - Log) - [j == Label]), Max
/// the row's max and Log its log-sum-exp past it (Label may lie outside the
/// row: a
/// vocabulary-parallel block that does not hold it). Scale is dLoss, over
/// the counted labels when Mean (0 when none were).
__device__ __forceinline__ void
writeCrossEntropyGradRow(DType DLossT, const void *DLoss, bool Mean,
                         const double *Counted, DType ZT, const void *Z,
                         DType DZT, void *DZ, int64_t Base, int64_t Classes,
                         double Max, double Log, int64_t Label) {
  double Scale = loadF(DLossT, DLoss, 0);
  if (Mean)
    Scale = *Counted ? Scale / *Counted : 0.0;
  for (int64_t J = threadIdx.x; J < Classes; J += blockDim.x) {
    double P = exp(double(loadF(ZT, Z, Base + J)) - Max - Log);
    storeF(DZT, DZ, Base + J, float(Scale * (P - (J == Label ? 1.0 : 0.0))));
  }
}

/// Zeros over one row of Classes at Base, the whole block (an ignored
/// label's gradient).
__device__ __forceinline__ void zeroRow(DType T, void *P, int64_t Base,
                                        int64_t Classes) {
  for (int64_t J = threadIdx.x; J < Classes; J += blockDim.x)
    storeF(T, P, Base + J, 0.0f);
}

} // namespace cuda
} // namespace autopar

#endif // AUTOPAR_RUNTIME_CUDA_DEVICESUPPORT_CUH
