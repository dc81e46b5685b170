//===- VectorMath.cpp - Elementwise f32 math over whole arrays ------------===//

#include "runtime/cpu/VectorMath.h"
#include "runtime/cpu/Kernels.h"
#include "runtime/cpu/VectorMathAvx2.h"

// GCC 12's AVX-512 intrinsics (the -march=native build, AUTOPAR_NATIVE)
// start from a self-initialized vector, which -Wuninitialized reports once
// Eigen's packets inline here (GCC bug 105593, fixed in GCC 13).
#pragma GCC diagnostic ignored "-Wuninitialized"
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
#include <Eigen/Core>
#include <unsupported/Eigen/SpecialFunctions>

#include <algorithm>
#include <atomic>
#include <cmath>
#include <vector>

using namespace autopar;
using namespace llvm;

namespace {

using ConstArray = Eigen::Map<const Eigen::ArrayXf>;
using Array = Eigen::Map<Eigen::ArrayXf>;

/// Below this, exp's f32 result is subnormal (exp(-87.3) is the smallest
/// normal): Eigen's exp gives subnormals there, down to exp(-88.38) for
/// -inf, and arithmetic on subnormals runs at a fraction of the speed (a
/// masked attention score would slow the GEMM that reads its probability).
/// Arguments are clamped to it before exp; a select around the exp instead
/// keeps Eigen from vectorizing it (3x slower with AVX-512).
constexpr float ExpFloor = -87.0f;
/// exp(ExpFloor) is 1.65e-38: results up to twice the smallest normal
/// float (2.35e-38, arguments below -86.6) are then set to 0, in a second
/// pass that works in place (it reads only the results).
constexpr float ExpZero = 2.3509887e-38f;

constexpr float InvSqrt2 = 0.7071067811865476f;
constexpr float InvSqrt2Pi = 0.3989422804014327f; // 1 / sqrt(2 pi)
constexpr float TanhScale = 0.7978845608028654f;  // sqrt(2 / pi)
constexpr float TanhCubic = 0.044715f;

/// setGenericVectorMath's switch.
std::atomic<bool> Generic{false};

} // namespace

void autopar::setGenericVectorMath(bool G) { Generic = G; }

bool autopar::avx2::isAvailable() {
#if defined(AUTOPAR_HAVE_AVX2_MATH)
  static const bool Available =
      __builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma");
  return Available && !Generic.load(std::memory_order_relaxed);
#else
  return false;
#endif
}

namespace autopar {
namespace generic {
#include "runtime/cpu/RowMath.inc"
#include "runtime/cpu/RowMathDecls.inc"
} // namespace generic
} // namespace autopar

/// AdamW one element at a time, in torch's order: the compiler vectorizes
/// it where the results do not replace the operands; either way each
/// element is the same IEEE operations (no FMA in the portable build).
void autopar::generic::adamWRange(const float *P, const float *G,
                                  const float *M, const float *V, float *PO,
                                  float *MO, float *VO, int64_t N,
                                  const AdamWScalars &S) {
  // A copy the stores below cannot alias, so the loop keeps the scalars in
  // registers.
  const AdamWScalars C = S;
  for (int64_t J = 0; J != N; ++J) {
    float Grad = G[J];
    float Mean = M[J] * C.Beta1 + Grad * C.OneMinusBeta1;
    float Square = V[J] * C.Beta2 + Grad * Grad * C.OneMinusBeta2;
    float Param =
        P[J] * C.Decay -
        C.StepSize * Mean / (std::sqrt(Square) / C.Correction2Sqrt + C.Eps);
    MO[J] = Mean;
    VO[J] = Square;
    PO[J] = Param;
  }
}

#if !defined(AUTOPAR_HAVE_AVX2_MATH)
// Never called: isAvailable() is false.
void autopar::avx2::expShifted(const float *, float, float *, int64_t) {}
float autopar::avx2::maxOf(const float *, int64_t) { return 0; }
void autopar::avx2::gelu(const float *, float *, int64_t, bool) {}
void autopar::avx2::geluGrad(const float *, const float *, float *, int64_t,
                             bool) {}
void autopar::avx2::adamWRange(const float *, const float *, const float *,
                               const float *, float *, float *, float *,
                               int64_t, const AdamWScalars &) {}
namespace autopar {
namespace avx2 {
#include "runtime/cpu/RowMath.inc"
} // namespace avx2
} // namespace autopar
#endif

/// The row kernel Name of this CPU's instruction set.
#define DISPATCH(Name, ...)                                                    \
  (avx2::isAvailable() ? avx2::Name(__VA_ARGS__) : generic::Name(__VA_ARGS__))

double autopar::sumAsDouble(const float *X, int64_t N) {
  return DISPATCH(sumAsDouble, X, N);
}

double autopar::dotAsDouble(const float *X, const float *Y, int64_t N) {
  return DISPATCH(dotAsDouble, X, Y, N);
}

RowMoments autopar::rowMoments(const float *X, int64_t N, bool Centered) {
  return DISPATCH(rowMoments, X, N, Centered);
}

void autopar::normalizeRow(const float *X, const float *Scale,
                           const float *Bias, float Mean, float Inv, float *Y,
                           int64_t N) {
  DISPATCH(normalizeRow, X, Scale, Bias, Mean, Inv, Y, N);
}

NormGradSums autopar::normGradSums(const float *X, const float *DY,
                                   const float *Scale, float Mean, float Inv,
                                   int64_t N, double *DScale, double *DBias) {
  return DISPATCH(normGradSums, X, DY, Scale, Mean, Inv, N, DScale, DBias);
}

void autopar::normGradRow(const float *X, const float *DY, const float *Scale,
                          float Mean, float Inv, float MeanG, float MeanGX,
                          float *DX, int64_t N) {
  DISPATCH(normGradRow, X, DY, Scale, Mean, Inv, MeanG, MeanGX, DX, N);
}

void autopar::softmaxGradRow(const float *P, float *DP, float Inner,
                             float Scale, int64_t N) {
  DISPATCH(softmaxGradRow, P, DP, Inner, Scale, N);
}

void autopar::scaleRow(float *X, float Factor, int64_t N) {
  DISPATCH(scaleRow, X, Factor, N);
}

double autopar::expShifted(const float *X, float Shift, float *Y, int64_t N) {
  if (avx2::isAvailable()) {
    avx2::expShifted(X, Shift, Y, N);
    return sumAsDouble(Y, N);
  }
  Array Out(Y, N);
  ConstArray In(X, N);
  Out = (In - Shift).max(ExpFloor).exp();
  Out = (Out <= ExpZero).select(0.0f, Out);
  return sumAsDouble(Y, N);
}

float autopar::maxOf(const float *X, int64_t N) {
  if (avx2::isAvailable())
    return avx2::maxOf(X, N);
  return N ? ConstArray(X, N).maxCoeff() : -INFINITY;
}

void autopar::geluArray(const float *X, float *Y, int64_t N, bool Tanh) {
  parallelForChunks(N, [&](int64_t Begin, int64_t End) {
    int64_t Count = End - Begin;
    if (avx2::isAvailable())
      return avx2::gelu(X + Begin, Y + Begin, Count, Tanh);
    ConstArray V(X + Begin, Count);
    Array Out(Y + Begin, Count);
    if (Tanh)
      Out =
          0.5f * V * (1.0f + (TanhScale * (V + TanhCubic * V * V * V)).tanh());
    else
      Out = 0.5f * V * (1.0f + (V * InvSqrt2).erf());
  });
}

void autopar::geluGradArray(const float *DY, const float *X, float *DX,
                            int64_t N, bool Tanh) {
  parallelForChunks(N, [&](int64_t Begin, int64_t End) {
    int64_t Count = End - Begin;
    if (avx2::isAvailable())
      return avx2::geluGrad(DY + Begin, X + Begin, DX + Begin, Count, Tanh);
    ConstArray G(DY + Begin, Count), V(X + Begin, Count);
    Array Out(DX + Begin, Count);
    if (Tanh) {
      Eigen::ArrayXf T = (TanhScale * (V + TanhCubic * V * V * V)).tanh();
      Out = G * (0.5f * (1.0f + T) + 0.5f * V * (1.0f - T * T) * TanhScale *
                                         (1.0f + 3.0f * TanhCubic * V * V));
    } else {
      // exp's argument is clamped where its result would be subnormal (a
      // term below 1e-36 next to 0.5 (1 + erf), about 1).
      Out = G * (0.5f * (1.0f + (V * InvSqrt2).erf()) +
                 V * (-0.5f * V * V).max(ExpFloor).exp() * InvSqrt2Pi);
    }
  });
}

void autopar::adamWRange(const float *P, const float *G, const float *M,
                         const float *V, float *PO, float *MO, float *VO,
                         int64_t N, const AdamWScalars &S) {
  DISPATCH(adamWRange, P, G, M, V, PO, MO, VO, N, S);
}

void autopar::adamWArray(const float *P, const float *G, const float *M,
                         const float *V, float *PO, float *MO, float *VO,
                         int64_t N, const AdamWScalars &S) {
  adamWTensors(AdamWTensor{P, G, M, V, PO, MO, VO, N}, S);
}

void autopar::adamWTensors(ArrayRef<AdamWTensor> Tensors,
                           const AdamWScalars &S) {
  // Where each parameter starts in the elements of all of them.
  std::vector<int64_t> Starts(Tensors.size() + 1, 0);
  for (size_t K = 0; K != Tensors.size(); ++K)
    Starts[K + 1] = Starts[K] + Tensors[K].N;
  parallelForChunks(Starts.back(), [&](int64_t Begin, int64_t End) {
    size_t K = std::upper_bound(Starts.begin(), Starts.end(), Begin) -
               Starts.begin() - 1;
    for (; K != Tensors.size() && Starts[K] < End; ++K) {
      int64_t From = std::max(Begin, Starts[K]);
      int64_t To = std::min(End, Starts[K + 1]);
      if (To > From) {
        const AdamWTensor &T = Tensors[K];
        int64_t At = From - Starts[K];
        adamWRange(T.P + At, T.G + At, T.M + At, T.V + At, T.PO + At, T.MO + At,
                   T.VO + At, To - From, S);
      }
    }
  });
}
