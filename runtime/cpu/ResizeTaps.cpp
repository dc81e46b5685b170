//===- ResizeTaps.cpp - What each Resize output index reads ---------------===//

#include "runtime/cpu/ResizeTaps.h"

#include <algorithm>
#include <array>
#include <cmath>

using namespace autopar;
using namespace autopar::resize;

/// The input coordinate of output index X along an axis of In elements
/// resized to Out by Scale; RoiStart and RoiEnd are tf_crop_and_resize's.
static float originalCoordinate(Coord C, float X, float Scale, int64_t In,
                                int64_t Out, float RoiStart, float RoiEnd) {
  float LenIn = float(In), LenOut = float(Out);
  switch (C) {
  case Coord::HalfPixel:
    return (X + 0.5f) / Scale - 0.5f;
  case Coord::HalfPixelSymmetric: {
    float Adjustment = LenOut / (Scale * LenIn);
    float Offset = LenIn / 2 * (1 - Adjustment);
    return Offset + (X + 0.5f) / Scale - 0.5f;
  }
  case Coord::PytorchHalfPixel:
    return Out > 1 ? (X + 0.5f) / Scale - 0.5f : 0.0f;
  case Coord::AlignCorners:
    return Out == 1 ? 0.0f : X * (LenIn - 1) / (LenOut - 1);
  case Coord::Asymmetric:
    return X / Scale;
  case Coord::TfCropAndResize:
    return Out > 1 ? RoiStart * (LenIn - 1) +
                         X * (RoiEnd - RoiStart) * (LenIn - 1) / (LenOut - 1)
                   : 0.5f * (RoiStart + RoiEnd) * (LenIn - 1);
  case Coord::TfHalfPixelForNN:
    return (X + 0.5f) / Scale;
  }
  return X;
}

/// The nearest input index of coordinate X (not yet clamped).
static int64_t nearestIndex(Rounding R, float X, float Scale) {
  switch (R) {
  case Rounding::PreferFloor:
    if (X == std::floor(X) + 0.5f)
      return int64_t(std::floor(X));
    return int64_t(std::round(X));
  case Rounding::PreferCeil:
    return int64_t(std::round(X));
  case Rounding::Floor:
    return int64_t(std::floor(X));
  case Rounding::Ceil:
    return int64_t(std::ceil(X));
  case Rounding::Simple:
    return Scale < 1 ? int64_t(std::ceil(X)) : int64_t(X);
  }
  return 0;
}

/// Keys' cubic convolution weights of the taps at floor(x) - 1 .. floor(x)
/// + 2 for S = x - floor(x).
static std::array<double, 4> cubicWeights(double S, double A) {
  double T = 1 - S;
  return {((A * (S + 1) - 5 * A) * (S + 1) + 8 * A) * (S + 1) - 4 * A,
          ((A + 2) * S - (A + 3)) * S * S + 1,
          ((A + 2) * T - (A + 3)) * T * T + 1,
          ((A * (T + 1) - 5 * A) * (T + 1) + 8 * A) * (T + 1) - 4 * A};
}

/// T without its taps of weight 0 (an axis read at whole coordinates).
static AxisTaps dropZeroTaps(AxisTaps T) {
  for (size_t J = T.Index.size(); J-- > 0;)
    if (T.Weight[J] == 0) {
      T.Index.erase(T.Index.begin() + J);
      T.Weight.erase(T.Weight.begin() + J);
    }
  return T;
}

/// The filter of antialiased linear (a triangle) or cubic (Keys' kernel of
/// parameter A) interpolation at distance X.
static float antialiasFilter(Interp Mode, float X, float A) {
  X = std::fabs(X);
  if (Mode == Interp::Linear)
    return X < 1.0f ? 1.0f - X : 0.0f;
  if (X < 1.0f)
    return ((A + 2.0f) * X - (A + 3.0f)) * X * X + 1.0f;
  if (X < 2.0f)
    return (((X - 5.0f) * X + 8.0f) * X - 4.0f) * A;
  return 0.0f;
}

/// The antialiased taps of input coordinate X along an axis of In elements
/// resized to Out by Scale (the file comment says how).
static void antialiasTaps(const ResizeMode &M, float X, float Scale, int64_t In,
                          AxisTaps &T) {
  float Shrink = 1.0f / Scale;
  float Half = M.Mode == Interp::Cubic ? 2.0f : 1.0f;
  float Support = Shrink >= 1.0f ? Half * Shrink : Half;
  float Stretch = Shrink >= 1.0f ? 1.0f / Shrink : 1.0f;
  float Center = X + 0.5f;
  int64_t Low = int64_t(std::floor(Center - Support + 0.5f));
  int64_t High = int64_t(std::floor(Center + Support + 0.5f));
  float Total = 0;
  for (int64_t I = Low; I < High; ++I) {
    if (M.ExcludeOutside && (I < 0 || I >= In))
      continue;
    float W = antialiasFilter(M.Mode, (float(I) - Center + 0.5f) * Stretch,
                              float(M.CubicA));
    T.Index.push_back(std::clamp<int64_t>(I, 0, In - 1));
    T.Weight.push_back(W);
    Total += W;
  }
  if (Total != 0)
    for (double &W : T.Weight)
      W = double(float(W) / Total);
}

AxisTaps resize::axisTaps(const ResizeMode &M, int64_t O, float Scale,
                          int64_t In, int64_t Out, float RoiStart,
                          float RoiEnd) {
  AxisTaps T;
  if (M.Antialias && In == Out) {
    // onnxruntime copies an axis kept at its size, whatever its scale.
    T.Index.push_back(O);
    T.Weight.push_back(1);
    return T;
  }
  float X = originalCoordinate(M.Transform, float(O), Scale, In, Out, RoiStart,
                               RoiEnd);
  if (M.Transform == Coord::TfCropAndResize && (X < 0 || X > float(In - 1))) {
    T.Outside = true;
    return T;
  }
  auto Clamp = [&](int64_t I) { return std::clamp<int64_t>(I, 0, In - 1); };
  if (M.Antialias) {
    antialiasTaps(M, X, Scale, In, T);
    return dropZeroTaps(T);
  }
  switch (M.Mode) {
  case Interp::Nearest:
    T.Index.push_back(Clamp(nearestIndex(M.Nearest, X, Scale)));
    T.Weight.push_back(1);
    return T;
  case Interp::Linear: {
    X = std::clamp(X, 0.0f, float(In - 1));
    int64_t Low = int64_t(X), High = std::min(Low + 1, In - 1);
    double W = double(X) - double(Low);
    T.Index = {Low, High};
    T.Weight = {1 - W, W};
    break;
  }
  case Interp::Cubic: {
    double Floor = std::floor(double(X));
    std::array<double, 4> W = cubicWeights(double(X) - Floor, M.CubicA);
    double Total = 0;
    for (int64_t J = 0; J != 4; ++J) {
      int64_t I = int64_t(Floor) - 1 + J;
      if (M.ExcludeOutside && (I < 0 || I >= In))
        continue;
      T.Index.push_back(Clamp(I));
      T.Weight.push_back(W[J]);
      Total += W[J];
    }
    if (M.ExcludeOutside)
      for (double &V : T.Weight)
        V /= Total;
    break;
  }
  }
  return dropZeroTaps(T);
}
