//===- VectorMathAvx2.cpp - VectorMath's kernels for AVX2 and FMA ---------===//
//
// Built with -mavx2 -mfma (runtime/CMakeLists.txt); see the header for why
// this file uses nothing but the intrinsics.
//
//===----------------------------------------------------------------------===//

#include "runtime/cpu/VectorMathAvx2.h"

#include <immintrin.h>

namespace {

/// A mask of the first N (< 8) lanes, for loads and stores of the tail.
__m256i tailMask(int64_t N) {
  const __m256i Lanes = _mm256_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7);
  return _mm256_cmpgt_epi32(_mm256_set1_epi32(int(N)), Lanes);
}

/// exp(X) for X in [-87, 88] (X is clamped there; NaN stays NaN), Cephes'
/// polynomial as Eigen's pexp_float evaluates it.
__m256 exp8(__m256 X) {
  // max(c, X) and min(c, X) return X when X is NaN.
  X = _mm256_max_ps(_mm256_set1_ps(-87.0f), X);
  X = _mm256_min_ps(_mm256_set1_ps(88.0f), X);
  // X = M ln 2 + R, M = floor(X log2(e) + 1/2).
  __m256 M = _mm256_floor_ps(_mm256_fmadd_ps(
      X, _mm256_set1_ps(1.44269504088896341f), _mm256_set1_ps(0.5f)));
  __m256 R = _mm256_fmadd_ps(M, _mm256_set1_ps(-0.693359375f), X);
  R = _mm256_fmadd_ps(M, _mm256_set1_ps(2.12194440e-4f), R);
  __m256 R2 = _mm256_mul_ps(R, R);
  __m256 R3 = _mm256_mul_ps(R2, R);
  __m256 Y = _mm256_fmadd_ps(_mm256_set1_ps(1.9875691500e-4f), R,
                             _mm256_set1_ps(1.3981999507e-3f));
  __m256 Y1 = _mm256_fmadd_ps(_mm256_set1_ps(4.1665795894e-2f), R,
                              _mm256_set1_ps(1.6666665459e-1f));
  __m256 Y2 = _mm256_add_ps(R, _mm256_set1_ps(1.0f));
  Y = _mm256_fmadd_ps(Y, R, _mm256_set1_ps(8.3334519073e-3f));
  Y1 = _mm256_fmadd_ps(Y1, R, _mm256_set1_ps(5.0000001201e-1f));
  Y = _mm256_fmadd_ps(Y, R3, Y1);
  Y = _mm256_fmadd_ps(Y, R2, Y2);
  // 2^M by its exponent bits: M is in [-126, 127] after the clamp.
  __m256i E = _mm256_slli_epi32(
      _mm256_add_epi32(_mm256_cvtps_epi32(M), _mm256_set1_epi32(127)), 23);
  return _mm256_mul_ps(Y, _mm256_castsi256_ps(E));
}

/// exp8 with results up to twice the smallest normal float set to 0 (at -87
/// the result is 1.65e-38).
__m256 expNoSubnormal8(__m256 X) {
  __m256 Y = exp8(X);
  __m256 Tiny = _mm256_cmp_ps(Y, _mm256_set1_ps(2.3509887e-38f), _CMP_LE_OQ);
  return _mm256_andnot_ps(Tiny, Y);
}

/// erf(X): Eigen's generic_fast_erf_float (rational, odd 13 over even 8,
/// on X clamped to [-4, 4]).
__m256 erf8(__m256 X) {
  X = _mm256_min_ps(_mm256_set1_ps(4.0f), X);
  X = _mm256_max_ps(_mm256_set1_ps(-4.0f), X);
  __m256 X2 = _mm256_mul_ps(X, X);
  __m256 P = _mm256_fmadd_ps(X2, _mm256_set1_ps(-2.72614225801306e-10f),
                             _mm256_set1_ps(2.77068142495902e-08f));
  P = _mm256_fmadd_ps(X2, P, _mm256_set1_ps(-2.10102402082508e-06f));
  P = _mm256_fmadd_ps(X2, P, _mm256_set1_ps(-5.69250639462346e-05f));
  P = _mm256_fmadd_ps(X2, P, _mm256_set1_ps(-7.34990630326855e-04f));
  P = _mm256_fmadd_ps(X2, P, _mm256_set1_ps(-2.95459980854025e-03f));
  P = _mm256_fmadd_ps(X2, P, _mm256_set1_ps(-1.60960333262415e-02f));
  P = _mm256_mul_ps(X, P);
  __m256 Q = _mm256_fmadd_ps(X2, _mm256_set1_ps(-1.45660718464996e-05f),
                             _mm256_set1_ps(-2.13374055278905e-04f));
  Q = _mm256_fmadd_ps(X2, Q, _mm256_set1_ps(-1.68282697438203e-03f));
  Q = _mm256_fmadd_ps(X2, Q, _mm256_set1_ps(-7.37332916720468e-03f));
  Q = _mm256_fmadd_ps(X2, Q, _mm256_set1_ps(-1.42647390514189e-02f));
  return _mm256_div_ps(P, Q);
}

/// tanh(X): Eigen's generic_fast_tanh_float with FMA (rational, odd 13
/// over even 6, on X clamped to +-7.9988; X itself below 0.0004).
__m256 tanh8(__m256 X) {
  __m256 Abs = _mm256_andnot_ps(_mm256_set1_ps(-0.0f), X);
  __m256 Tiny = _mm256_cmp_ps(Abs, _mm256_set1_ps(0.0004f), _CMP_LT_OQ);
  __m256 C = _mm256_min_ps(_mm256_set1_ps(7.99881172180175781f), X);
  C = _mm256_max_ps(_mm256_set1_ps(-7.99881172180175781f), C);
  __m256 X2 = _mm256_mul_ps(C, C);
  __m256 P = _mm256_fmadd_ps(X2, _mm256_set1_ps(-2.76076847742355e-16f),
                             _mm256_set1_ps(2.00018790482477e-13f));
  P = _mm256_fmadd_ps(X2, P, _mm256_set1_ps(-8.60467152213735e-11f));
  P = _mm256_fmadd_ps(X2, P, _mm256_set1_ps(5.12229709037114e-08f));
  P = _mm256_fmadd_ps(X2, P, _mm256_set1_ps(1.48572235717979e-05f));
  P = _mm256_fmadd_ps(X2, P, _mm256_set1_ps(6.37261928875436e-04f));
  P = _mm256_fmadd_ps(X2, P, _mm256_set1_ps(4.89352455891786e-03f));
  P = _mm256_mul_ps(C, P);
  __m256 Q = _mm256_fmadd_ps(X2, _mm256_set1_ps(1.19825839466702e-06f),
                             _mm256_set1_ps(1.18534705686654e-04f));
  Q = _mm256_fmadd_ps(X2, Q, _mm256_set1_ps(2.26843463243900e-03f));
  Q = _mm256_fmadd_ps(X2, Q, _mm256_set1_ps(4.89352518554385e-03f));
  return _mm256_blendv_ps(_mm256_div_ps(P, Q), C, Tiny);
}

const float InvSqrt2 = 0.7071067811865476f;
const float InvSqrt2Pi = 0.3989422804014327f; // 1 / sqrt(2 pi)
const float TanhScale = 0.7978845608028654f;  // sqrt(2 / pi)
const float TanhCubic = 0.044715f;

/// gelu(V), exact (erf) or with tanh.
__m256 gelu8(__m256 V, bool Tanh) {
  __m256 Half = _mm256_mul_ps(_mm256_set1_ps(0.5f), V);
  __m256 S;
  if (Tanh) {
    __m256 V3 = _mm256_mul_ps(_mm256_mul_ps(V, V), V);
    __m256 In =
        _mm256_mul_ps(_mm256_set1_ps(TanhScale),
                      _mm256_fmadd_ps(_mm256_set1_ps(TanhCubic), V3, V));
    S = tanh8(In);
  } else {
    S = erf8(_mm256_mul_ps(V, _mm256_set1_ps(InvSqrt2)));
  }
  return _mm256_fmadd_ps(Half, S, Half);
}

/// DY gelu'(V) for the form of gelu8.
__m256 geluGrad8(__m256 G, __m256 V, bool Tanh) {
  const __m256 Half = _mm256_set1_ps(0.5f), One = _mm256_set1_ps(1.0f);
  __m256 V2 = _mm256_mul_ps(V, V);
  __m256 D;
  if (Tanh) {
    __m256 In = _mm256_mul_ps(
        _mm256_set1_ps(TanhScale),
        _mm256_fmadd_ps(_mm256_set1_ps(TanhCubic), _mm256_mul_ps(V2, V), V));
    __m256 T = tanh8(In);
    // 0.5 (1 + T) + 0.5 V (1 - T^2) sqrt(2/pi) (1 + 3 c V^2).
    __m256 Inner = _mm256_fmadd_ps(_mm256_set1_ps(3.0f * TanhCubic), V2, One);
    __m256 Slope = _mm256_mul_ps(
        _mm256_mul_ps(_mm256_mul_ps(Half, V), _mm256_fnmadd_ps(T, T, One)),
        _mm256_mul_ps(_mm256_set1_ps(TanhScale), Inner));
    D = _mm256_fmadd_ps(Half, _mm256_add_ps(One, T), Slope);
  } else {
    // 0.5 (1 + erf(V / sqrt 2)) + V exp(-V^2 / 2) / sqrt(2 pi).
    __m256 E = erf8(_mm256_mul_ps(V, _mm256_set1_ps(InvSqrt2)));
    __m256 Density = exp8(_mm256_mul_ps(_mm256_set1_ps(-0.5f), V2));
    D = _mm256_fmadd_ps(_mm256_mul_ps(V, Density), _mm256_set1_ps(InvSqrt2Pi),
                        _mm256_mul_ps(Half, _mm256_add_ps(One, E)));
  }
  return _mm256_mul_ps(G, D);
}

} // namespace

void autopar::avx2::expShifted(const float *X, float Shift, float *Y,
                               int64_t N) {
  const __m256 S = _mm256_set1_ps(Shift);
  int64_t I = 0;
  for (; I + 8 <= N; I += 8)
    _mm256_storeu_ps(Y + I,
                     expNoSubnormal8(_mm256_sub_ps(_mm256_loadu_ps(X + I), S)));
  if (I != N) {
    __m256i Mask = tailMask(N - I);
    __m256 V = _mm256_maskload_ps(X + I, Mask);
    _mm256_maskstore_ps(Y + I, Mask, expNoSubnormal8(_mm256_sub_ps(V, S)));
  }
}

float autopar::avx2::maxOf(const float *X, int64_t N) {
  const __m256 Low = _mm256_set1_ps(-__builtin_inff());
  __m256 M0 = Low, M1 = Low;
  int64_t I = 0;
  for (; I + 16 <= N; I += 16) {
    // max(M, V) keeps V when V is NaN, and a NaN M stays NaN below.
    M0 = _mm256_max_ps(M0, _mm256_loadu_ps(X + I));
    M1 = _mm256_max_ps(M1, _mm256_loadu_ps(X + I + 8));
  }
  for (; I + 8 <= N; I += 8)
    M0 = _mm256_max_ps(M0, _mm256_loadu_ps(X + I));
  if (I != N) {
    __m256i Mask = tailMask(N - I);
    __m256 V = _mm256_blendv_ps(Low, _mm256_maskload_ps(X + I, Mask),
                                _mm256_castsi256_ps(Mask));
    M1 = _mm256_max_ps(M1, V);
  }
  alignas(32) float Lanes[8];
  _mm256_store_ps(Lanes, _mm256_max_ps(M0, M1));
  float Max = Lanes[0];
  for (int L = 1; L != 8; ++L)
    Max = Lanes[L] > Max || Lanes[L] != Lanes[L] ? Lanes[L] : Max;
  return Max;
}

void autopar::avx2::gelu(const float *X, float *Y, int64_t N, bool Tanh) {
  int64_t I = 0;
  for (; I + 8 <= N; I += 8)
    _mm256_storeu_ps(Y + I, gelu8(_mm256_loadu_ps(X + I), Tanh));
  if (I != N) {
    __m256i Mask = tailMask(N - I);
    _mm256_maskstore_ps(Y + I, Mask,
                        gelu8(_mm256_maskload_ps(X + I, Mask), Tanh));
  }
}

void autopar::avx2::geluGrad(const float *DY, const float *X, float *DX,
                             int64_t N, bool Tanh) {
  int64_t I = 0;
  for (; I + 8 <= N; I += 8)
    _mm256_storeu_ps(DX + I, geluGrad8(_mm256_loadu_ps(DY + I),
                                       _mm256_loadu_ps(X + I), Tanh));
  if (I != N) {
    __m256i Mask = tailMask(N - I);
    _mm256_maskstore_ps(DX + I, Mask,
                        geluGrad8(_mm256_maskload_ps(DY + I, Mask),
                                  _mm256_maskload_ps(X + I, Mask), Tanh));
  }
}

/// One AdamW step of 8 elements in torch's order (the products that torch
/// adds fused with the add).
static void adamW8(const float *P, const float *G, const float *M,
                   const float *V, float *PO, float *MO, float *VO,
                   const autopar::AdamWScalars &S, __m256i Mask, bool Full) {
  auto Load = [&](const float *X) {
    return Full ? _mm256_loadu_ps(X) : _mm256_maskload_ps(X, Mask);
  };
  auto Store = [&](float *X, __m256 Y) {
    if (Full)
      _mm256_storeu_ps(X, Y);
    else
      _mm256_maskstore_ps(X, Mask, Y);
  };
  __m256 Grad = Load(G);
  __m256 Mean =
      _mm256_fmadd_ps(Load(M), _mm256_set1_ps(S.Beta1),
                      _mm256_mul_ps(Grad, _mm256_set1_ps(S.OneMinusBeta1)));
  __m256 Square =
      _mm256_fmadd_ps(Load(V), _mm256_set1_ps(S.Beta2),
                      _mm256_mul_ps(_mm256_mul_ps(Grad, Grad),
                                    _mm256_set1_ps(S.OneMinusBeta2)));
  __m256 Denom = _mm256_add_ps(
      _mm256_div_ps(_mm256_sqrt_ps(Square), _mm256_set1_ps(S.Correction2Sqrt)),
      _mm256_set1_ps(S.Eps));
  __m256 Update =
      _mm256_div_ps(_mm256_mul_ps(_mm256_set1_ps(S.StepSize), Mean), Denom);
  __m256 Param = _mm256_fmsub_ps(Load(P), _mm256_set1_ps(S.Decay), Update);
  Store(MO, Mean);
  Store(VO, Square);
  Store(PO, Param);
}

void autopar::avx2::adamWRange(const float *P, const float *G, const float *M,
                               const float *V, float *PO, float *MO, float *VO,
                               int64_t N, const AdamWScalars &S) {
  int64_t J = 0;
  const __m256i All = _mm256_set1_epi32(-1);
  for (; J + 8 <= N; J += 8)
    adamW8(P + J, G + J, M + J, V + J, PO + J, MO + J, VO + J, S, All, true);
  if (J != N)
    adamW8(P + J, G + J, M + J, V + J, PO + J, MO + J, VO + J, S,
           tailMask(N - J), false);
}

namespace autopar {
namespace avx2 {
#include "runtime/cpu/RowMath.inc"
} // namespace avx2
} // namespace autopar
