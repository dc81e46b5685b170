//===- VectorMath.h - Elementwise f32 math over whole arrays ----*- C++ -*-===//
//
// The kernels' vectorized math over arrays and rows of f32: the
// transcendental functions of the activations and softmax rows (exp, GELU
// and its gradient), AdamW, and the row kernels (f64 sums and dot
// products, the norms' moments and rows, the softmax gradient row). On a
// CPU with AVX2 and FMA they run VectorMathAvx2.cpp's (intrinsics, and
// RowMath.inc compiled for AVX2); elsewhere Eigen's packet exp, tanh and
// erf (a few ulp from the C library's) and RowMath.inc compiled for the
// portable target. Arrays are split into fixed chunks over the kernel
// threads, so results do not depend on the thread count.
//
//===----------------------------------------------------------------------===//

#ifndef AUTOPAR_RUNTIME_CPU_VECTORMATH_H
#define AUTOPAR_RUNTIME_CPU_VECTORMATH_H

#include "runtime/cpu/VectorMathTypes.h"

#include "llvm/ADT/ArrayRef.h"

#include <cstdint>

namespace autopar {

/// For tests: with Generic, the portable (Eigen) kernels run even on a CPU
/// with AVX2 and FMA (VectorMathAvx2.h), which otherwise run.
void setGenericVectorMath(bool Generic);

/// Y = exp(X - Shift) over N elements, on the calling thread (a row of a
/// softmax), 0 where exp's result would be subnormal; returns the sum of Y
/// in f64 (in a fixed order for a given N).
double expShifted(const float *X, float Shift, float *Y, int64_t N);

/// The largest of N elements (-inf for none), vectorized; a NaN may or may
/// not be returned (the softmax it shifts then gives NaN either way).
float maxOf(const float *X, int64_t N);

/// Y = gelu(X) over N elements: 0.5 x (1 + erf(x / sqrt 2)), or with Tanh
/// 0.5 x (1 + tanh(sqrt(2 / pi) (x + 0.044715 x^3))).
void geluArray(const float *X, float *Y, int64_t N, bool Tanh);

/// DX = DY * gelu'(X) over N elements, the derivative of geluArray's form.
void geluGradArray(const float *DY, const float *X, float *DX, int64_t N,
                   bool Tanh);

// The row kernels (declared in RowMathDecls.inc, also for each
// instruction set's copy).
#include "runtime/cpu/RowMathDecls.inc"

/// One AdamW step over N elements in f32, in torch.optim.AdamW's order of
/// operations: p *= 1 - lr wd; m = b1 m + (1 - b1) g; v = b2 v + (1 - b2)
/// g^2; p -= lr / (1 - b1^t) * m / (sqrt(v) / sqrt(1 - b2^t) + eps) (with
/// AVX2, each product that is then added is fused with the add, as torch's
/// vectorized add with alpha does). The results may share their buffers
/// with the operands they replace. Every element is computed the same way
/// wherever it lies.
void adamWArray(const float *P, const float *G, const float *M, const float *V,
                float *PO, float *MO, float *VO, int64_t N,
                const AdamWScalars &S);
/// The operands and results of one parameter's AdamW step (N elements).
struct AdamWTensor {
  const float *P, *G, *M, *V;
  float *PO, *MO, *VO;
  int64_t N;
};
/// adamWArray over several parameters as one array: chunks of a fixed
/// size over the elements of all of them in order, split over the kernel
/// threads (a multi-tensor step; small parameters share a chunk).
void adamWTensors(llvm::ArrayRef<AdamWTensor> Tensors, const AdamWScalars &S);

} // namespace autopar

#endif // AUTOPAR_RUNTIME_CPU_VECTORMATH_H
