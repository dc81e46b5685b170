//===- KernelSupport.cpp - What CPU kernels share -------------------------===//

#include "runtime/cpu/KernelSupport.h"
#include "runtime/cpu/Kernels.h"

#include "ir/Graph.h"

#include <algorithm>
#include <cassert>
#include <cmath>
#include <cstring>
#include <memory>

using namespace autopar;
using namespace llvm;

template <typename T>
static void copyStridedAs(char *Dst, const char *Src, int64_t Count,
                          StridedWalk &Walk, unsigned SrcOperand) {
  for (int64_t I = 0; I != Count; ++I, Walk.next())
    std::memcpy(Dst + I * sizeof(T), Src + Walk.offset(SrcOperand) * sizeof(T),
                sizeof(T));
}

void autopar::copyStrided(char *Dst, const char *Src, size_t ElemSize,
                          int64_t Count, StridedWalk &Walk,
                          unsigned SrcOperand) {
  // Source rows that are contiguous (a transpose that keeps the last axis,
  // a slice of whole rows) copy a row at a time.
  if (Walk.contiguousRun(SrcOperand) >= 8) {
    for (int64_t I = 0; I < Count;) {
      int64_t Run = std::min(Walk.contiguousRun(SrcOperand), Count - I);
      std::memcpy(Dst + I * ElemSize, Src + Walk.offset(SrcOperand) * ElemSize,
                  size_t(Run) * ElemSize);
      I += Run;
      Walk.advance(Run);
    }
    return;
  }
  switch (ElemSize) {
  case 1:
    return copyStridedAs<uint8_t>(Dst, Src, Count, Walk, SrcOperand);
  case 2:
    return copyStridedAs<uint16_t>(Dst, Src, Count, Walk, SrcOperand);
  case 4:
    return copyStridedAs<uint32_t>(Dst, Src, Count, Walk, SrcOperand);
  case 8:
    return copyStridedAs<uint64_t>(Dst, Src, Count, Walk, SrcOperand);
  }
  for (int64_t I = 0; I != Count; ++I, Walk.next())
    std::memcpy(Dst + I * ElemSize, Src + Walk.offset(SrcOperand) * ElemSize,
                ElemSize);
}

namespace {
/// Grows to the largest size asked for, never shrinks; new bytes are left
/// uninitialised (unique_ptr<T[]> of a default-initialised array).
struct ScratchBuffer {
  std::unique_ptr<uint8_t[]> Data;
  size_t Size = 0;

  uint8_t *get(size_t Bytes) {
    if (Bytes > Size) {
      Data.reset(new uint8_t[Bytes]);
      Size = Bytes;
    }
    return Data.get();
  }
};
thread_local ScratchBuffer Scratch[ScratchSlots];
} // namespace

float *autopar::getScratchFloats(unsigned Slot, size_t Elements) {
  assert(Slot < ScratchSlots && "no such scratch slot");
  return reinterpret_cast<float *>(
      Scratch[Slot].get(std::max<size_t>(Elements, 1) * sizeof(float)));
}

uint8_t *autopar::getScratchBytes(unsigned Slot, size_t Bytes) {
  assert(Slot < ScratchSlots && "no such scratch slot");
  return Scratch[Slot].get(std::max<size_t>(Bytes, 1));
}

void autopar::copyStridedOnThreads(char *Dst, const char *Src, size_t ElemSize,
                                   ArrayRef<int64_t> Extents,
                                   ArrayRef<int64_t> Strides) {
  int64_t Count = getNumElements(Extents);
  // Below this a thread's start costs more than the copy.
  constexpr int64_t MinParallel = 1 << 15;
  if (Extents.size() < 2 || Extents[0] < 2 || Count < MinParallel) {
    StridedWalk Walk(Extents, {Shape(Strides.begin(), Strides.end())});
    copyStrided(Dst, Src, ElemSize, Count, Walk, 0);
    return;
  }
  int64_t Inner = Count / Extents[0];
  Shape InnerStrides(Strides.begin() + 1, Strides.end());
  parallelFor(Extents[0], [&](int64_t I) {
    StridedWalk Walk(Extents.drop_front(), {InnerStrides}, {I * Strides[0]});
    copyStrided(Dst + I * Inner * ElemSize, Src, ElemSize, Inner, Walk, 0);
  });
}

float autopar::halfToFloat(uint16_t H) {
  uint32_t Sign = uint32_t(H & 0x8000) << 16;
  uint32_t Exp = (H >> 10) & 0x1f, Mant = H & 0x3ff;
  if (Exp == 0) {
    float V = std::ldexp(float(Mant), -24);
    return Sign ? -V : V;
  }
  uint32_t Bits = Exp == 31 ? Sign | 0x7f800000 | (Mant << 13)
                            : Sign | ((Exp + 112) << 23) | (Mant << 13);
  float V;
  std::memcpy(&V, &Bits, 4);
  return V;
}

uint16_t autopar::floatToHalf(float V) {
  uint32_t X;
  std::memcpy(&X, &V, 4);
  uint16_t Sign = uint16_t((X >> 16) & 0x8000);
  uint32_t Abs = X & 0x7fffffff;
  if (Abs >= 0x7f800000) // Infinity or NaN (kept quiet).
    return Sign | 0x7c00 | (Abs > 0x7f800000 ? 0x200 : 0);
  if (Abs >= 0x477ff000) // 65520 and above round to infinity.
    return Sign | 0x7c00;
  if (Abs < 0x38800000) { // Below 2^-14: a subnormal half (or zero).
    float F;
    std::memcpy(&F, &Abs, 4);
    return Sign | uint16_t(std::nearbyint(F * 16777216.0f));
  }
  uint32_t H = ((Abs >> 23) - 112) << 10 | ((Abs & 0x7fffff) >> 13);
  uint32_t Rest = Abs & 0x1fff;
  if (Rest > 0x1000 || (Rest == 0x1000 && (H & 1)))
    ++H;
  return Sign | uint16_t(H);
}

float autopar::bfloat16ToFloat(uint16_t Bits) {
  uint32_t X = uint32_t(Bits) << 16;
  float V;
  std::memcpy(&V, &X, 4);
  return V;
}

uint16_t autopar::floatToBfloat16(float V) {
  uint32_t X;
  std::memcpy(&X, &V, 4);
  if ((X & 0x7fffffff) > 0x7f800000)
    return uint16_t((X >> 16) | 0x40);
  X += 0x7fff + ((X >> 16) & 1);
  return uint16_t(X >> 16);
}

std::optional<double> autopar::numberAt(const Tensor &T, int64_t I) {
  switch (T.getElementType()) {
  case ElementType::F32:
    return T.data<float>()[I];
  case ElementType::F64:
    return T.data<double>()[I];
  case ElementType::I64:
    return double(T.data<int64_t>()[I]);
  case ElementType::I32:
    return T.data<int32_t>()[I];
  case ElementType::I8:
    return T.data<int8_t>()[I];
  case ElementType::U8:
    return T.data<uint8_t>()[I];
  default:
    return std::nullopt;
  }
}
