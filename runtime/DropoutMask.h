//===- DropoutMask.h - Counter-based dropout masks --------------*- C++ -*-===//
//
// Philox4x32-10 (Salmon, Moraes, Dror and Shaw, "Parallel random numbers:
// as easy as 1, 2, 3", SC 2011; the generator of cuRAND and of PyTorch's
// CUDA dropout): 128 random bits from a 128-bit counter and a 64-bit key,
// with no state. Any element's bits are computed from its coordinates, so
// a recomputed forward, a backward that regenerates its mask, and another
// rank holding another block of the same tensor all draw the same bits.
// Host and device code (the CUDA kernels include this header).
//
// The dropout mask of element `Index` of a random tensor (DropoutBlock
// below gives the index) keeps it when the 32-bit lane Index % 4 of
// philox(counter = {Index / 4 low, high, Step, MicroBatch},
//        key = {Seed low ^ Stream * 0x9E3779B9, Seed high})
// is at least Threshold = round(ratio * 2^32).
//
//===----------------------------------------------------------------------===//

#ifndef AUTOPAR_RUNTIME_DROPOUTMASK_H
#define AUTOPAR_RUNTIME_DROPOUTMASK_H

#include <cstdint>

#ifdef __CUDACC__
#define AUTOPAR_HOST_DEVICE __host__ __device__ __forceinline__
#else
#define AUTOPAR_HOST_DEVICE inline
#endif

namespace autopar {

struct Philox4x32 {
  uint32_t V[4];
};

AUTOPAR_HOST_DEVICE uint32_t mulHi32(uint32_t A, uint32_t B) {
  return uint32_t((uint64_t(A) * B) >> 32);
}

/// Ten rounds of Philox4x32 (the constants of Random123).
AUTOPAR_HOST_DEVICE Philox4x32 philox4x32(uint32_t C0, uint32_t C1, uint32_t C2,
                                          uint32_t C3, uint32_t K0,
                                          uint32_t K1) {
  for (int Round = 0; Round != 10; ++Round) {
    uint32_t Hi0 = mulHi32(0xD2511F53u, C0), Lo0 = 0xD2511F53u * C0;
    uint32_t Hi1 = mulHi32(0xCD9E8D57u, C2), Lo1 = 0xCD9E8D57u * C2;
    uint32_t N0 = Hi1 ^ C1 ^ K0, N2 = Hi0 ^ C3 ^ K1;
    C0 = N0;
    C1 = Lo1;
    C2 = N2;
    C3 = Lo0;
    K0 += 0x9E3779B9u;
    K1 += 0xBB67AE85u;
  }
  return {{C0, C1, C2, C3}};
}

/// What a dropout mask is drawn from, besides the element's index: the
/// run's seed, the node's stream, the step and the global micro-batch.
struct DropoutKey {
  uint32_t Key0 = 0, Key1 = 0;
  uint32_t Step = 0, MicroBatch = 0;
  /// Elements whose draw is below Threshold are dropped.
  uint32_t Threshold = 0;
  /// 1 / (1 - ratio): what kept elements are multiplied by.
  float Scale = 1;

  /// The four draws of indices [4 Q, 4 Q + 4).
  AUTOPAR_HOST_DEVICE Philox4x32 draw(uint64_t Q) const {
    return philox4x32(uint32_t(Q), uint32_t(Q >> 32), Step, MicroBatch, Key0,
                      Key1);
  }
  AUTOPAR_HOST_DEVICE bool keeps(uint64_t Index) const {
    return draw(Index / 4).V[Index % 4] >= Threshold;
  }
  /// Keep[J] = keeps(Start + J) for J in [0, Len), one draw per four
  /// indices.
  AUTOPAR_HOST_DEVICE void keepsRun(uint64_t Start, int64_t Len,
                                    uint8_t *Keep) const {
    for (int64_t J = 0; J < Len;) {
      uint64_t Index = Start + uint64_t(J);
      Philox4x32 D = draw(Index / 4);
      for (unsigned L = unsigned(Index % 4); L != 4 && J < Len; ++L, ++J)
        Keep[J] = D.V[L] >= Threshold;
    }
  }
};

/// The run's random state in a step.
struct StepRandom {
  /// autopar-run's --seed.
  uint64_t Seed = 0;
  /// The step being run (from 1 in a training run).
  int64_t Step = 0;
  /// This rank's data-parallel replica.
  int64_t Replica = 0;
};

/// A rank's block of a random tensor of one micro-batch: its local shape,
/// the whole tensor's (unsplit over the mesh) and where the block starts in
/// it. An element's index is its row-major index in the whole tensor, so
/// the masks do not depend on how tensor parallelism splits it.
struct DropoutBlock {
  static constexpr int MaxRank = 6;
  DropoutKey Key;
  int Rank = 0;
  int64_t Local[MaxRank] = {}, Global[MaxRank] = {}, Offset[MaxRank] = {};

  /// Elements of a local row (the last dimension).
  AUTOPAR_HOST_DEVICE int64_t rowLength() const {
    return Rank ? Local[Rank - 1] : 1;
  }
  /// The whole tensor's index of the first element of local row Row; the
  /// row's elements follow it one by one.
  AUTOPAR_HOST_DEVICE uint64_t rowStart(int64_t Row) const {
    if (Rank == 0)
      return 0;
    uint64_t Index = 0, Stride = 1;
    Index += uint64_t(Offset[Rank - 1]);
    Stride = uint64_t(Global[Rank - 1]);
    for (int D = Rank - 2; D >= 0; --D) {
      int64_t Coord = Row % Local[D];
      Row /= Local[D];
      Index += uint64_t(Offset[D] + Coord) * Stride;
      Stride *= uint64_t(Global[D]);
    }
    return Index;
  }
  /// Whether local element I (row-major in the local block) is kept.
  AUTOPAR_HOST_DEVICE bool keeps(int64_t I) const {
    int64_t Len = rowLength();
    return Key.keeps(rowStart(I / Len) + uint64_t(I % Len));
  }
};

} // namespace autopar

#endif // AUTOPAR_RUNTIME_DROPOUTMASK_H
