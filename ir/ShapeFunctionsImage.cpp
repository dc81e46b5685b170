//===- ShapeFunctionsImage.cpp - Crops, grids and group norms -------------===//
//
// Shape functions of the image and cache ops ONNX added after opset 17:
// CenterCropPad and GroupNormalization (18), AffineGrid (20) and
// TensorScatter (24); and of Resize (opset 19's form).
//
//===----------------------------------------------------------------------===//

#include "ir/Graph.h"
#include "ir/NNShapeHelpers.h"
#include "ir/ShapeFunctions.h"

#include "llvm/ADT/STLExtras.h"

#include <cmath>
#include <sstream>

using namespace autopar;
using namespace autopar::nn;
using namespace llvm;

// input with the dimensions of `axes` (all when absent) set to the constant
// `shape`: cropped where larger, padded where smaller.
InferResult autopar::inferCenterCropPad(const ShapeContext &Ctx) {
  const TensorType &In = Ctx.getOperandType(0);
  unsigned Rank = In.getRank();
  std::optional<SmallVector<Dim, 4>> Target = Ctx.getShapeOperand(1);
  SmallVector<int64_t, 4> Axes;
  if (const Attribute *A = Ctx.getAttr("axes"))
    Axes.assign(A->getIntList().begin(), A->getIntList().end());
  else
    for (unsigned I = 0; I != Rank; ++I)
      Axes.push_back(I);
  SmallVector<Dim, 4> Shape(In.getShape().begin(), In.getShape().end());
  if (Target && Target->size() != Axes.size())
    return Ctx.error("shape has " + Twine(Target->size()) + " entries for " +
                     Twine(Axes.size()) + " axes");
  for (size_t I = 0, E = Axes.size(); I != E; ++I) {
    int64_t Axis = Axes[I] < 0 ? Axes[I] + Rank : Axes[I];
    if (Axis < 0 || Axis >= int64_t(Rank))
      return Ctx.error("axis " + Twine(Axes[I]) + " is out of range for " +
                       describe(Ctx, 0));
    Shape[Axis] = Target ? (*Target)[I] : Dim();
  }
  return Types{TensorType(In.getElementType(), Shape)};
}

// X [N, C, ...], scale and bias [C] (opset 21) or [num_groups] (18): Y like
// X; num_groups divides C.
InferResult autopar::inferGroupNorm(const ShapeContext &Ctx) {
  if (Error E = checkFloat(Ctx, 0))
    return E;
  const TensorType &X = Ctx.getOperandType(0);
  if (X.getRank() < 2)
    return Ctx.error(describe(Ctx, 0) + " must have a batch and a channel "
                                        "dimension");
  int64_t Groups = Ctx.getIntAttr("num_groups", 0);
  if (Groups <= 0)
    return Ctx.error("'num_groups' must be positive, got " + Twine(Groups));
  const Dim &C = X.getDim(1);
  if (C.isStatic() && C.getSize() % Groups != 0)
    return Ctx.error("'num_groups' " + Twine(Groups) + " does not divide the " +
                     dimStr(C) + " channels of " + describe(Ctx, 0));
  for (unsigned I : {1u, 2u}) {
    if (Error E = checkSameElementTypeAs(Ctx, I, 0))
      return E;
    const TensorType &T = Ctx.getOperandType(I);
    if (T.getRank() != 1 ||
        (!mayEqual(T.getDim(0), C) && !mayEqual(T.getDim(0), Dim::get(Groups))))
      return Ctx.error(describe(Ctx, I) + " must have shape [" + dimStr(C) +
                       "] (or [num_groups] before opset 21)");
  }
  return Types{X};
}

// theta [N, 2, 3] and size [N, C, H, W] give [N, H, W, 2]; theta [N, 3, 4]
// and size [N, C, D, H, W] give [N, D, H, W, 3].
InferResult autopar::inferAffineGrid(const ShapeContext &Ctx) {
  if (Error E = checkFloat(Ctx, 0))
    return E;
  if (Error E = checkRank(Ctx, 0, 3))
    return E;
  std::optional<SmallVector<Dim, 4>> Size = Ctx.getShapeOperand(1);
  unsigned Spatial =
      Size ? Size->size() - 2
           : (dimOf(Ctx, 0, 1).isStatic() ? dimOf(Ctx, 0, 1).getSize() : 0);
  if (Spatial != 2 && Spatial != 3)
    return Ctx.error("theta must be [N, 2, 3] or [N, 3, 4], and size [N, C, "
                     "H, W] or [N, C, D, H, W]");
  SmallVector<Dim, 5> Shape = {dimOf(Ctx, 0, 0)};
  for (unsigned I = 0; I != Spatial; ++I)
    Shape.push_back(Size ? (*Size)[I + 2] : Dim());
  Shape.push_back(Dim::get(Spatial));
  return Types{TensorType(elementTypeOf(Ctx, 0), Shape)};
}

// past_cache, update of the same rank and element type, write_indices
// [batch] i64?: the updated cache, of past_cache's type.
InferResult autopar::inferTensorScatter(const ShapeContext &Ctx) {
  const TensorType &Cache = Ctx.getOperandType(0);
  if (Error E = checkSameElementTypeAs(Ctx, 1, 0))
    return E;
  if (Ctx.getOperandType(1).getRank() != Cache.getRank())
    return Ctx.error(describe(Ctx, 1) + " must have the rank of " +
                     describe(Ctx, 0));
  if (Ctx.hasOperand(2)) {
    if (Error E = checkElementType(Ctx, 2, ElementType::I64))
      return E;
    if (Error E = checkRank(Ctx, 2, 1))
      return E;
  }
  if (const Attribute *Mode = Ctx.getAttr("mode"))
    if (Mode->getString() != "linear" && Mode->getString() != "circular")
      return Ctx.error("'mode' must be linear or circular, got '" +
                       Mode->getString() + "'");
  return Types{Cache};
}

/// Resize's axes, normalized: the `axes` attribute, else every axis.
static Expected<SmallVector<unsigned, 4>> getResizeAxes(const ShapeContext &Ctx,
                                                        unsigned Rank) {
  SmallVector<unsigned, 4> Axes;
  const Attribute *A = Ctx.getAttr("axes");
  if (!A) {
    for (unsigned I = 0; I != Rank; ++I)
      Axes.push_back(I);
    return Axes;
  }
  for (int64_t Given : A->getIntList()) {
    Expected<unsigned> Axis = normalizeAxis(Ctx, Given, Rank);
    if (!Axis)
      return Axis.takeError();
    if (is_contained(Axes, *Axis))
      return Ctx.error("axis " + Twine(Given) + " is given twice");
    Axes.push_back(*Axis);
  }
  return Axes;
}

/// An error unless 1-D operand I, when its length is static, has Count
/// entries; What says what they are.
static Error checkLength(const ShapeContext &Ctx, unsigned I, int64_t Count,
                         const Twine &What) {
  if (Error E = checkVector(Ctx, I))
    return E;
  const Dim &Length = dimOf(Ctx, I, 0);
  if (Length.isStatic() && Length.getSize() != Count)
    return Ctx.error(describe(Ctx, I) + " must have " + Twine(Count) + " " +
                     What);
  return Error::success();
}

/// The resized dimension of D scaled by Scale: floor(D * Scale) when D is
/// static, the product taken in f32 as onnxruntime does (5 * 2.6f is 13,
/// not 12.99..); D * Scale for a whole Scale, else unknown; nullopt when
/// the size would not fit in 2^48 elements (an infinite scale).
static std::optional<Dim> scaleDim(const Dim &D, double Scale) {
  constexpr double Limit = double(int64_t(1) << 48);
  if (D.isStatic()) {
    double Size = std::floor(float(D.getSize()) * float(Scale));
    if (!(Size < Limit))
      return std::nullopt;
    return Dim::get(int64_t(Size));
  }
  if (Scale == std::floor(Scale))
    return Scale < Limit ? std::optional(D * Dim::get(int64_t(Scale)))
                         : std::nullopt;
  return Dim();
}

// X with the axes of `axes` (all when absent) resized by the constant
// scales, or set to the constant sizes (scaled by one common factor under
// keep_aspect_ratio_policy not_larger or not_smaller: round(size * factor),
// halves up); unknown where they are not constant.
InferResult autopar::inferResize(const ShapeContext &Ctx) {
  for (auto [Name, Allowed] :
       {std::pair<StringRef, SmallVector<StringRef, 7>>{
            "mode", {"nearest", "linear", "cubic"}},
        {"coordinate_transformation_mode",
         {"half_pixel", "half_pixel_symmetric", "pytorch_half_pixel",
          "align_corners", "asymmetric", "tf_crop_and_resize",
          "tf_half_pixel_for_nn"}},
        {"nearest_mode",
         {"round_prefer_floor", "round_prefer_ceil", "floor", "ceil",
          "simple"}},
        {"keep_aspect_ratio_policy", {"stretch", "not_larger", "not_smaller"}}})
    if (Expected<StringRef> V = getChoice(Ctx, Name, Allowed); !V)
      return V.takeError();
  for (StringRef Flag : {"antialias", "exclude_outside"})
    if (Error E = checkFlag(Ctx, Flag))
      return E;
  const TensorType &X = Ctx.getOperandType(0);
  unsigned Rank = X.getRank();
  if (Rank == 0)
    return Ctx.error(describe(Ctx, 0) + " must have a dimension");
  Expected<SmallVector<unsigned, 4>> Axes = getResizeAxes(Ctx, Rank);
  if (!Axes)
    return Axes.takeError();
  int64_t Count = Axes->size();
  bool HasScales = Ctx.hasOperand(2), HasSizes = Ctx.hasOperand(3);
  if (HasScales == HasSizes)
    return Ctx.error("exactly one of scales and sizes must be given");
  const Attribute *Coord = Ctx.getAttr("coordinate_transformation_mode");
  if (Coord && Coord->getString() == "tf_crop_and_resize") {
    if (!Ctx.hasOperand(1))
      return Ctx.error("roi is required by tf_crop_and_resize");
    if (Error E = checkFloat(Ctx, 1))
      return E;
    if (Error E = checkLength(Ctx, 1, 2 * Count,
                              "entries, a start and an end per resized axis"))
      return E;
  }
  SmallVector<Dim, 4> Shape(X.getShape().begin(), X.getShape().end());
  if (HasScales) {
    if (Error E = checkElementType(Ctx, 2, ElementType::F32))
      return E;
    if (Error E = checkLength(Ctx, 2, Count, "entries, one per resized axis"))
      return E;
    const DenseTensor *Scales = Ctx.getConstantOperand(2);
    for (int64_t I = 0; I != Count; ++I) {
      Dim &D = Shape[(*Axes)[I]];
      if (!Scales) {
        D = Dim();
        continue;
      }
      double Scale = Scales->getFloats()[I];
      if (!(Scale > 0)) {
        std::ostringstream Text;
        Text << Scale;
        return Ctx.error("scales must be positive, got " + Text.str() +
                         " for axis " + Twine((*Axes)[I]));
      }
      std::optional<Dim> Scaled = scaleDim(D, Scale);
      if (!Scaled) {
        std::ostringstream Text;
        Text << Scale;
        return Ctx.error("scale " + Text.str() + " gives axis " +
                         Twine((*Axes)[I]) + " of " + describe(Ctx, 0) +
                         " too many elements");
      }
      D = *Scaled;
    }
    return Types{TensorType(X.getElementType(), Shape)};
  }
  if (Error E = checkElementType(Ctx, 3, ElementType::I64))
    return E;
  if (Error E = checkLength(Ctx, 3, Count, "entries, one per resized axis"))
    return E;
  std::optional<SmallVector<Dim, 4>> Sizes = Ctx.getShapeOperand(3);
  const Attribute *Policy = Ctx.getAttr("keep_aspect_ratio_policy");
  bool Stretch = !Policy || Policy->getString() == "stretch";
  // The common factor of not_larger (the smallest ratio) or not_smaller
  // (the largest), in f32 as onnxruntime; nullopt when a size is not
  // static.
  // The common scale of keep_aspect_ratio_policy (a flag and a value: GCC
  // 12 warns that an optional's payload may be used uninitialized).
  bool HasCommon = Sizes && !Stretch;
  float Common = 0;
  if (HasCommon) {
    for (int64_t I = 0; I != Count; ++I) {
      const Dim &In = X.getDim((*Axes)[I]), &Out = (*Sizes)[I];
      if (!In.isStatic() || !Out.isStatic() || In.getSize() == 0) {
        HasCommon = false;
        break;
      }
      float Ratio = float(Out.getSize()) / float(In.getSize());
      bool Larger = Policy->getString() == "not_smaller";
      if (!I || (Larger ? Ratio > Common : Ratio < Common))
        Common = Ratio;
    }
  }
  for (int64_t I = 0; I != Count; ++I) {
    Dim &D = Shape[(*Axes)[I]];
    if (!Sizes)
      D = Dim();
    else if (Stretch)
      D = (*Sizes)[I];
    else if (HasCommon)
      D = Dim::get(int64_t(std::floor(Common * float(D.getSize()) + 0.5f)));
    else
      D = Dim();
  }
  return Types{TensorType(X.getElementType(), Shape)};
}
