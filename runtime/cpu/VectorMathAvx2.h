//===- VectorMathAvx2.h - VectorMath's kernels for AVX2 and FMA -*- C++ -*-===//
//
// The transcendental kernels of VectorMath.h written with AVX2 and FMA
// intrinsics, in a file of their own that is the only one built with
// -mavx2 -mfma: VectorMath.cpp calls them when the CPU has both, so that a
// portable build (SSE2 otherwise) still computes 8 floats per instruction.
// That file defines nothing that another file may also define (no
// templates, no inline functions of headers other than the intrinsics'),
// so no AVX2 code can stand in for a portable copy at link time. The row
// kernels (RowMath.inc) are the portable ones' source compiled again for
// AVX2, which the compiler vectorizes 8 floats (4 doubles) wide.
//
// Every element is computed the same way wherever it lies in the array (the
// last partial vector is loaded and stored with a mask), so results do not
// depend on how callers split an array. exp's arguments are clamped to
// [-87, 88]: at -87 and below the result is 0 where it would be below twice
// the smallest normal float (as VectorMath.h's), never subnormal. The
// polynomials are Eigen's (Cephes' exp, Eigen's rational erf and tanh),
// evaluated with FMA: within a few ulp of the C library's.
//
//===----------------------------------------------------------------------===//

#ifndef AUTOPAR_RUNTIME_CPU_VECTORMATHAVX2_H
#define AUTOPAR_RUNTIME_CPU_VECTORMATHAVX2_H

#include "runtime/cpu/VectorMathTypes.h"

#include <cstdint>

namespace autopar {
namespace avx2 {

/// True when this build has the kernels below, the CPU runs them, and
/// setGenericVectorMath (VectorMath.h) has not turned them off.
bool isAvailable();

/// Y = exp(X - Shift), 0 where it would be below 2.35e-38.
void expShifted(const float *X, float Shift, float *Y, int64_t N);
/// The largest element (-inf for none); NaN when there is one.
float maxOf(const float *X, int64_t N);
/// As geluArray and geluGradArray of VectorMath.h.
void gelu(const float *X, float *Y, int64_t N, bool Tanh);
void geluGrad(const float *DY, const float *X, float *DX, int64_t N, bool Tanh);

/// The row kernels of VectorMath.h and AdamW (RowMath.inc and adamWRange,
/// compiled for AVX2 and FMA).
#include "runtime/cpu/RowMathDecls.inc"

} // namespace avx2
} // namespace autopar

#endif // AUTOPAR_RUNTIME_CPU_VECTORMATHAVX2_H
