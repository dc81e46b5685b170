//===- VectorMathTypes.h - The plain structs of VectorMath.h ----*- C++ -*-===//
//
// The results and scalars of VectorMath.h's row kernels, apart so that
// VectorMathAvx2.h can name them without including anything else (the
// AVX2 file must define nothing that other files also define).
//
//===----------------------------------------------------------------------===//

#ifndef AUTOPAR_RUNTIME_CPU_VECTORMATHTYPES_H
#define AUTOPAR_RUNTIME_CPU_VECTORMATHTYPES_H

namespace autopar {

/// A row's mean (0 unless centered) and its variance about it.
struct RowMoments {
  double Mean, Variance;
};

/// A norm gradient row's sums: of G = DY Scale, and of G XHat.
struct NormGradSums {
  double G, GX;
};

/// The scalars of an AdamW step (VectorMath.h's adamWArray).
struct AdamWScalars {
  float Decay, Beta1, OneMinusBeta1, Beta2, OneMinusBeta2, StepSize,
      Correction2Sqrt, Eps;
};

} // namespace autopar

#endif // AUTOPAR_RUNTIME_CPU_VECTORMATHTYPES_H
