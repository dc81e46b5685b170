//===- VectorMath.cpp - Elementwise f32 math over whole arrays ------------===//

#include "runtime/cpu/VectorMath.h"
#include "runtime/cpu/Kernels.h"

#include <Eigen/Core>
#include <unsupported/Eigen/SpecialFunctions>

#include <algorithm>

using namespace autopar;

namespace {

using ConstArray = Eigen::Map<const Eigen::ArrayXf>;
using Array = Eigen::Map<Eigen::ArrayXf>;

/// Elements per chunk a thread takes: large enough to hide the thread's
/// start, small enough to spread a layer's activations.
constexpr int64_t ChunkElements = 1 << 16;

/// Runs Body(Begin, Count) over [0, N) in chunks on the kernel threads.
template <typename BodyTy> void forChunks(int64_t N, BodyTy Body) {
  int64_t Chunks = (N + ChunkElements - 1) / ChunkElements;
  parallelFor(Chunks, [&](int64_t C) {
    int64_t Begin = C * ChunkElements;
    Body(Begin, std::min(ChunkElements, N - Begin));
  });
}

/// exp(V), with 0 where V < -87 (below exp's smallest normal result):
/// Eigen's exp gives subnormals there, down to exp(-88.38) for -inf, and
/// arithmetic on subnormals runs at a fraction of the speed (a masked
/// attention score would slow the GEMM that reads its probability).
template <typename ExprTy> auto expFlushed(const ExprTy &V) {
  return (V < -87.0f).select(0.0f, V.exp());
}

constexpr float InvSqrt2 = 0.7071067811865476f;
constexpr float InvSqrt2Pi = 0.3989422804014327f; // 1 / sqrt(2 pi)
constexpr float TanhScale = 0.7978845608028654f;  // sqrt(2 / pi)
constexpr float TanhCubic = 0.044715f;

} // namespace

double autopar::expShifted(const float *X, float Shift, float *Y, int64_t N) {
  Array Out(Y, N);
  Out = ConstArray(X, N) - Shift;
  Out = expFlushed(Out);
  double Sum = 0;
  for (int64_t I = 0; I != N; ++I)
    Sum += Y[I];
  return Sum;
}

void autopar::geluArray(const float *X, float *Y, int64_t N, bool Tanh) {
  forChunks(N, [&](int64_t Begin, int64_t Count) {
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
  forChunks(N, [&](int64_t Begin, int64_t Count) {
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
                 V * (-0.5f * V * V).max(-87.0f).exp() * InvSqrt2Pi);
    }
  });
}

void autopar::adamWArray(const float *P, const float *G, const float *M,
                         const float *V, float *PO, float *MO, float *VO,
                         int64_t N, const AdamWScalars &S) {
  forChunks(N, [&](int64_t Begin, int64_t Count) {
    ConstArray Grad(G + Begin, Count);
    Array Mean(MO + Begin, Count), Square(VO + Begin, Count),
        Param(PO + Begin, Count);
    Mean = ConstArray(M + Begin, Count) * S.Beta1 + Grad * S.OneMinusBeta1;
    Square =
        ConstArray(V + Begin, Count) * S.Beta2 + Grad * Grad * S.OneMinusBeta2;
    Param = ConstArray(P + Begin, Count) * S.Decay -
            S.StepSize * Mean / (Square.sqrt() / S.Correction2Sqrt + S.Eps);
  });
}
