//===- ResizeKernels.cpp - Resize -----------------------------------------===//
//
// ONNX Resize (opset 19) as onnxruntime computes it: linear and cubic in f32
// (f64, f16 and bf16 run in f32), nearest on any element type. Each resized
// axis maps output index x to a coordinate x' of the input (the
// coordinate_transformation_mode, in float arithmetic as onnxruntime), and
// reads a list of taps there: nearest one tap (nearest_mode; "simple" is
// onnxruntime's rule of Resize-10 and Upsample: truncation, or ceil along an
// axis that shrinks), the index clamped into the axis; linear two, x'
// clamped into [0, size - 1]; cubic four at floor(x') - 1 .. floor(x') + 2
// with Keys' weights (cubic_coeff_a), indices clamped to the edge, or with
// exclude_outside the weights of those outside dropped and the rest
// renormalized. Under tf_crop_and_resize an x' outside [0, size - 1] on any
// axis gives extrapolation_value. An output element is the sum over the
// product of its axes' taps, weights multiplied, in f64.
//
// With antialias, linear and cubic taps are onnxruntime's (Pillow's
// resampling): the filter (triangle, or Keys' cubic) is stretched by
// in / out along an axis that shrinks, centred on x' + 0.5, and covers the
// input indices [floor(c - support + 0.5), floor(c + support + 0.5)) for
// the half support 1 (linear) or 2 (cubic), times in / out when shrinking;
// taps outside the axis add to the edge (or are dropped with
// exclude_outside), and the weights are normalized to sum 1. An axis kept
// at its size is copied, as onnxruntime does.
//
//===----------------------------------------------------------------------===//

#include "runtime/cpu/KernelSupport.h"
#include "runtime/cpu/Kernels.h"

#include "ir/Graph.h"

#include "llvm/ADT/STLExtras.h"
#include "llvm/ADT/StringSwitch.h"

#include <algorithm>
#include <array>
#include <cmath>
#include <limits>
#include <type_traits>
#include <vector>

using namespace autopar;
using namespace llvm;

namespace {

enum class Interp { Nearest, Linear, Cubic };
enum class Coord {
  HalfPixel,
  HalfPixelSymmetric,
  PytorchHalfPixel,
  AlignCorners,
  Asymmetric,
  TfCropAndResize,
  TfHalfPixelForNN,
};
enum class Rounding { PreferFloor, PreferCeil, Floor, Ceil, Simple };

/// What Resize's attributes ask for.
struct ResizeMode {
  Interp Mode;
  Coord Transform;
  Rounding Nearest;
  double CubicA;
  bool ExcludeOutside;
  /// Linear or cubic with antialias (nearest ignores it).
  bool Antialias;
  float Extrapolation;
};

/// The input taps one output index along one axis reads.
struct AxisTaps {
  SmallVector<int64_t, 4> Index;
  SmallVector<double, 4> Weight;
  /// tf_crop_and_resize's coordinate fell outside the axis.
  bool Outside = false;
};

} // namespace

static Expected<ResizeMode> getResizeMode(const KernelArgs &A) {
  ResizeMode M;
  StringRef Mode = A.stringAttr("mode", "nearest");
  std::optional<Interp> I = StringSwitch<std::optional<Interp>>(Mode)
                                .Case("nearest", Interp::Nearest)
                                .Case("linear", Interp::Linear)
                                .Case("cubic", Interp::Cubic)
                                .Default(std::nullopt);
  StringRef CoordName =
      A.stringAttr("coordinate_transformation_mode", "half_pixel");
  std::optional<Coord> C =
      StringSwitch<std::optional<Coord>>(CoordName)
          .Case("half_pixel", Coord::HalfPixel)
          .Case("half_pixel_symmetric", Coord::HalfPixelSymmetric)
          .Case("pytorch_half_pixel", Coord::PytorchHalfPixel)
          .Case("align_corners", Coord::AlignCorners)
          .Case("asymmetric", Coord::Asymmetric)
          .Case("tf_crop_and_resize", Coord::TfCropAndResize)
          .Case("tf_half_pixel_for_nn", Coord::TfHalfPixelForNN)
          .Default(std::nullopt);
  StringRef NearestName = A.stringAttr("nearest_mode", "round_prefer_floor");
  std::optional<Rounding> R =
      StringSwitch<std::optional<Rounding>>(NearestName)
          .Case("round_prefer_floor", Rounding::PreferFloor)
          .Case("round_prefer_ceil", Rounding::PreferCeil)
          .Case("floor", Rounding::Floor)
          .Case("ceil", Rounding::Ceil)
          .Case("simple", Rounding::Simple)
          .Default(std::nullopt);
  if (!I)
    return A.error("'mode' must be nearest, linear or cubic, got '" + Mode +
                   "'");
  if (!C)
    return A.error("unknown coordinate_transformation_mode '" + CoordName +
                   "'");
  if (!R)
    return A.error("unknown nearest_mode '" + NearestName + "'");
  M.Mode = *I;
  M.Transform = *C;
  M.Nearest = *R;
  M.CubicA = A.floatAttr("cubic_coeff_a", -0.75);
  M.ExcludeOutside = A.intAttr("exclude_outside", 0) != 0;
  M.Antialias = A.intAttr("antialias", 0) != 0 && *I != Interp::Nearest;
  M.Extrapolation = float(A.floatAttr("extrapolation_value", 0.0));
  return M;
}

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

/// The taps of output index O along an axis of In elements resized to Out.
static AxisTaps axisTaps(const ResizeMode &M, int64_t O, float Scale,
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

/// Resize's per-axis scales and output sizes (Scale 1 off `axes`), from
/// the scales or the sizes operand, and its roi per axis ([0, 1] where
/// not given).
struct ResizeGeometry {
  SmallVector<float, 4> Scale, RoiStart, RoiEnd;
  Shape Out;
};

static Expected<ResizeGeometry> getGeometry(const KernelArgs &A,
                                            const ResizeMode &M) {
  const Tensor &X = A.In[0];
  unsigned Rank = X.getRank();
  if (Rank == 0)
    return A.error("X must have a dimension");
  SmallVector<unsigned, 4> Axes;
  if (const Attribute *Attr = A.attr("axes")) {
    for (int64_t Given : Attr->getIntList()) {
      Expected<unsigned> Axis = A.normalizeAxis(Given, Rank);
      if (!Axis)
        return Axis.takeError();
      if (is_contained(Axes, *Axis))
        return A.error("axis " + Twine(Given) + " is given twice");
      Axes.push_back(*Axis);
    }
  } else {
    for (unsigned I = 0; I != Rank; ++I)
      Axes.push_back(I);
  }
  size_t Count = Axes.size();
  ResizeGeometry G;
  G.Scale.assign(Rank, 1.0f);
  G.RoiStart.assign(Rank, 0.0f);
  G.RoiEnd.assign(Rank, 1.0f);
  G.Out = toShape(X.getShape());
  if (A.has(2) == A.has(3))
    return A.error("exactly one of scales and sizes must be given");
  if (A.has(2)) {
    const Tensor &Scales = A.In[2];
    if (Scales.getNumElements() != int64_t(Count))
      return A.error("scales has " + Twine(Scales.getNumElements()) +
                     " entries for " + Twine(Count) + " axes");
    for (size_t I = 0; I != Count; ++I) {
      std::optional<double> S = numberAt(Scales, I);
      if (!S || !(*S > 0))
        return A.error("scales must be positive numbers");
      unsigned Axis = Axes[I];
      G.Scale[Axis] = float(*S);
      // In f32, as onnxruntime and the shape function.
      double Size = std::floor(float(X.getDim(Axis)) * float(*S));
      if (!(Size < double(int64_t(1) << 48)))
        return A.error("scales give axis " + Twine(Axis) +
                       " too many elements");
      G.Out[Axis] = int64_t(Size);
    }
  } else {
    Expected<Shape> Sizes = A.readInts(3);
    if (!Sizes)
      return Sizes.takeError();
    if (Sizes->size() != Count)
      return A.error("sizes has " + Twine(Sizes->size()) + " entries for " +
                     Twine(Count) + " axes");
    StringRef Policy = A.stringAttr("keep_aspect_ratio_policy", "stretch");
    std::optional<float> Common;
    for (size_t I = 0; I != Count; ++I) {
      int64_t In = X.getDim(Axes[I]), Size = (*Sizes)[I];
      if (Size <= 0 || In <= 0)
        return A.error("sizes and the resized axes must be positive");
      float Ratio = float(Size) / float(In);
      G.Scale[Axes[I]] = Ratio;
      G.Out[Axes[I]] = Size;
      if (!Common || (Policy == "not_larger" && Ratio < *Common) ||
          (Policy == "not_smaller" && Ratio > *Common))
        Common = Ratio;
    }
    if (Policy != "stretch")
      for (unsigned Axis : Axes) {
        G.Scale[Axis] = *Common;
        G.Out[Axis] =
            int64_t(std::floor(double(*Common) * double(X.getDim(Axis)) + 0.5));
      }
  }
  if (M.Transform == Coord::TfCropAndResize) {
    if (!A.has(1) || A.In[1].getNumElements() != int64_t(2 * Count))
      return A.error("tf_crop_and_resize needs roi with " + Twine(2 * Count) +
                     " entries");
    for (size_t I = 0; I != Count; ++I) {
      std::optional<double> Start = numberAt(A.In[1], I),
                            End = numberAt(A.In[1], I + Count);
      if (!Start || !End)
        return A.error("roi must be f32 or f64");
      G.RoiStart[Axes[I]] = float(*Start);
      G.RoiEnd[Axes[I]] = float(*End);
    }
  }
  return G;
}

/// Fills Y through the taps of each axis (Taps[D][output index]): the
/// weighted sum in f64 (T float), or the one tap's element as it is (nearest,
/// any T); Fill where tf_crop_and_resize extrapolates.
template <typename T>
static void resample(const Tensor &X, const Tensor &Y,
                     ArrayRef<std::vector<AxisTaps>> Taps, T Fill) {
  unsigned Rank = X.getRank();
  Shape Strides = getStrides(X.getShape());
  const T *XD = X.data<T>();
  T *YD = Y.data<T>();
  int64_t Cols = Y.getDim(Rank - 1);
  int64_t Rows = Y.getNumElements() / Cols;
  // Rows of the output (all axes but the last) are split over the threads.
  parallelFor(Rows, [&](int64_t Row) {
    SmallVector<const AxisTaps *, 4> Lists(Rank);
    for (int64_t Rest = Row, D = Rank - 1; D-- > 0;) {
      Lists[D] = &Taps[D][Rest % Y.getDim(D)];
      Rest /= Y.getDim(D);
    }
    SmallVector<size_t, 4> Pos(Rank);
    for (int64_t Col = 0; Col != Cols; ++Col) {
      Lists[Rank - 1] = &Taps[Rank - 1][Col];
      T &Out = YD[Row * Cols + Col];
      if (any_of(Lists, [](const AxisTaps *L) { return L->Outside; })) {
        Out = Fill;
        continue;
      }
      if constexpr (!std::is_same_v<T, float>) {
        int64_t Offset = 0;
        for (unsigned D = 0; D != Rank; ++D)
          Offset += Lists[D]->Index[0] * Strides[D];
        Out = XD[Offset];
        continue;
      } else {
        // The sum over every combination of the axes' taps.
        double Sum = 0;
        std::fill(Pos.begin(), Pos.end(), 0);
        while (true) {
          int64_t Offset = 0;
          double Weight = 1;
          for (unsigned D = 0; D != Rank; ++D) {
            Offset += Lists[D]->Index[Pos[D]] * Strides[D];
            Weight *= Lists[D]->Weight[Pos[D]];
          }
          Sum += Weight * double(XD[Offset]);
          unsigned D = Rank;
          while (D-- > 0) {
            if (++Pos[D] != Lists[D]->Index.size())
              break;
            Pos[D] = 0;
          }
          if (D == unsigned(-1))
            break;
        }
        Out = float(Sum);
      }
    }
  });
}

/// V as an integer of type T, clamped into its range.
template <typename T> static T clampTo(double V) {
  double Low = double(std::numeric_limits<T>::lowest()),
         High = double(std::numeric_limits<T>::max());
  return T(std::isnan(V) ? 0 : std::clamp(V, Low, High));
}

Error autopar::runResize(const KernelArgs &A) {
  const Tensor &X = A.In[0], &Y = A.Out[0];
  ElementType Elem = X.getElementType();
  if (Error E =
          A.checkType(0, {ElementType::F32, ElementType::I64, ElementType::I32,
                          ElementType::I8, ElementType::U8, ElementType::Bool}))
    return E;
  if (Error E = A.checkResultType(0, {Elem}))
    return E;
  Expected<ResizeMode> M = getResizeMode(A);
  if (!M)
    return M.takeError();
  if (Elem != ElementType::F32 && M->Mode != Interp::Nearest)
    return A.error("linear and cubic modes take f32 (f64, f16 and bf16 "
                   "run in f32), got " +
                   X.getTypeString());
  Expected<ResizeGeometry> G = getGeometry(A, *M);
  if (!G)
    return G.takeError();
  if (Error E = A.checkShape(0, G->Out))
    return E;
  unsigned Rank = X.getRank();
  if (Y.getNumElements() == 0)
    return Error::success();
  if (X.getNumElements() == 0)
    return A.error("cannot resize an empty input to a non-empty result");
  // Per axis and output index, its taps.
  std::vector<std::vector<AxisTaps>> Taps(Rank);
  for (unsigned D = 0; D != Rank; ++D)
    for (int64_t O = 0; O != G->Out[D]; ++O)
      Taps[D].push_back(axisTaps(*M, O, G->Scale[D], X.getDim(D), G->Out[D],
                                 G->RoiStart[D], G->RoiEnd[D]));
  double Fill = M->Extrapolation;
  switch (Elem) {
  case ElementType::F32:
    resample<float>(X, Y, Taps, float(Fill));
    break;
  case ElementType::I64:
    resample<int64_t>(X, Y, Taps, clampTo<int64_t>(Fill));
    break;
  case ElementType::I32:
    resample<int32_t>(X, Y, Taps, clampTo<int32_t>(Fill));
    break;
  case ElementType::I8:
    resample<int8_t>(X, Y, Taps, clampTo<int8_t>(Fill));
    break;
  default: // u8 and bool (one byte, bool 0 or 1).
    resample<uint8_t>(X, Y, Taps,
                      Elem == ElementType::Bool ? uint8_t(Fill != 0)
                                                : clampTo<uint8_t>(Fill));
    break;
  }
  return Error::success();
}
