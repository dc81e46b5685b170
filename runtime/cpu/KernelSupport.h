//===- KernelSupport.h - What CPU kernels share -----------------*- C++ -*-===//
//
// KernelArgs and the shape helpers are every backend's (runtime/KernelArgs.h);
// what only the CPU kernels share is here: the strided copy behind
// transposes, expands and slices, and the conversions of narrow floats.
//
//===----------------------------------------------------------------------===//

#ifndef AUTOPAR_RUNTIME_CPU_KERNELSUPPORT_H
#define AUTOPAR_RUNTIME_CPU_KERNELSUPPORT_H

#include "runtime/KernelArgs.h"

#include <cstddef>
#include <cstdint>
#include <optional>

namespace autopar {

/// Copies Count elements of ElemSize bytes from Src (offsets given by
/// SrcOffset) to consecutive elements of Dst, as Walk visits them: the
/// gather loop behind transposes, expands and slices.
/// Scratch memory of the calling thread, kept between calls (kernel
/// threads live as long as the process): no allocation and no zero fill
/// once it is large enough. Slot (below ScratchSlots) tells apart the
/// buffers one kernel uses at the same time; the contents are undefined.
constexpr unsigned ScratchSlots = 4;
float *getScratchFloats(unsigned Slot, size_t Elements);
uint8_t *getScratchBytes(unsigned Slot, size_t Bytes);

/// copyStrided of a whole shape (Extents, with Src's Strides) into Dst in
/// row-major order, the outermost dimension's indices split over the
/// kernel threads when there are enough elements.
void copyStridedOnThreads(char *Dst, const char *Src, size_t ElemSize,
                          llvm::ArrayRef<int64_t> Extents,
                          llvm::ArrayRef<int64_t> Strides);
void copyStrided(char *Dst, const char *Src, size_t ElemSize, int64_t Count,
                 StridedWalk &Walk, unsigned SrcOperand);

/// Element I of a numeric tensor (f32, f64, i64, i32, i8, u8) as a double;
/// nullopt for the types kernels see converted to f32 (f16, bf16, f8e4m3)
/// and for bool.
std::optional<double> numberAt(const Tensor &T, int64_t I);

/// float <-> storage conversions of f16, bf16 and f64 elements.
float halfToFloat(uint16_t Bits);
uint16_t floatToHalf(float V);
float bfloat16ToFloat(uint16_t Bits);
uint16_t floatToBfloat16(float V);

} // namespace autopar

#endif // AUTOPAR_RUNTIME_CPU_KERNELSUPPORT_H
