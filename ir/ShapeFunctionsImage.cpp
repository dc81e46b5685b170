//===- ShapeFunctionsImage.cpp - Crops, grids and group norms -------------===//
//
// Shape functions of the image and cache ops ONNX added after opset 17:
// CenterCropPad and GroupNormalization (18), AffineGrid (20) and
// TensorScatter (24).
//
//===----------------------------------------------------------------------===//

#include "ir/Graph.h"
#include "ir/NNShapeHelpers.h"
#include "ir/ShapeFunctions.h"

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
