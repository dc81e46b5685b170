//===- ResizeKernels.cpp - Resize -----------------------------------------===//
//
// ONNX Resize (opset 19) as onnxruntime computes it: linear and cubic in f32
// (f64, f16 and bf16 run in f32), nearest on any element type. The taps each
// output index reads along each axis come from ResizeTaps.h; an output
// element is the sum over the product of its axes' taps, weights
// multiplied, in f64 (nearest copies its one tap); under
// tf_crop_and_resize an element outside the input on any axis is
// extrapolation_value. The output's size per axis is floor(size * scale)
// (the product in f32, as onnxruntime), or the sizes (with
// keep_aspect_ratio_policy, round(size * the common factor), halves up).
//
//===----------------------------------------------------------------------===//

#include "runtime/cpu/KernelSupport.h"
#include "runtime/cpu/Kernels.h"
#include "runtime/cpu/ResizeTaps.h"

#include "ir/Graph.h"

#include "llvm/ADT/STLExtras.h"
#include "llvm/ADT/StringSwitch.h"

#include <algorithm>
#include <cmath>
#include <limits>
#include <type_traits>
#include <vector>

using namespace autopar;
using namespace autopar::resize;
using namespace llvm;

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
    if (Policy != "stretch" && Common)
      for (unsigned Axis : Axes) {
        G.Scale[Axis] = *Common;
        G.Out[Axis] =
            int64_t(std::floor(*Common * float(X.getDim(Axis)) + 0.5f));
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
