//===- ShapeFunctionsIndexing.cpp - Padding, indexing, rearranging --------===//
//
// Shape functions of ONNX's Pad, GatherND, ScatterND, SpaceToDepth,
// DepthToSpace, EyeLike, OneHot and ReverseSequence, at their newest opsets
// (Ops.def says what each operand is).
//
//===----------------------------------------------------------------------===//

#include "ir/Graph.h"
#include "ir/NNShapeHelpers.h"
#include "ir/ShapeFunctions.h"

#include "llvm/ADT/STLExtras.h"

using namespace autopar;
using namespace autopar::nn;
using namespace llvm;

/// An error unless operand I is a scalar or has shape [1].
static Error checkScalarLike(const ShapeContext &Ctx, unsigned I) {
  const TensorType &T = Ctx.getOperandType(I);
  if (T.getRank() == 0 || (T.getRank() == 1 && T.getDim(0) == Dim::get(1)))
    return Error::success();
  return Ctx.error(describe(Ctx, I) + " must be a scalar");
}

/// The axes of Pad, normalized: operand 3 when given (nullopt when its value
/// is not known), else every axis.
static Expected<std::optional<SmallVector<unsigned, 4>>>
getPadAxes(const ShapeContext &Ctx, unsigned Rank) {
  SmallVector<unsigned, 4> Axes;
  if (!Ctx.hasOperand(3)) {
    for (unsigned I = 0; I != Rank; ++I)
      Axes.push_back(I);
    return std::optional(Axes);
  }
  if (Error E = checkIndexType(Ctx, 3))
    return E;
  if (Error E = checkVector(Ctx, 3))
    return E;
  std::optional<ShapeValue> Value = Ctx.getShapeValue(3);
  if (!Value || any_of(*Value, [](const ShapeEntry &E) { return !E.Int; }))
    return std::optional<SmallVector<unsigned, 4>>();
  for (const ShapeEntry &Entry : *Value) {
    Expected<unsigned> Axis = normalizeAxis(Ctx, *Entry.Int, Rank);
    if (!Axis)
      return Axis.takeError();
    if (is_contained(Axes, *Axis))
      return Ctx.error("axis " + Twine(*Entry.Int) + " is given twice");
    Axes.push_back(*Axis);
  }
  return std::optional(Axes);
}

// data padded by pads [begin..., end...] along `axes`; a negative pad crops.
InferResult autopar::inferPad(const ShapeContext &Ctx) {
  Expected<StringRef> Mode =
      getChoice(Ctx, "mode", {"constant", "reflect", "edge", "wrap"});
  if (!Mode)
    return Mode.takeError();
  const TensorType &Data = Ctx.getOperandType(0);
  unsigned Rank = Data.getRank();
  if (Error E = checkElementType(Ctx, 1, ElementType::I64))
    return E;
  if (Error E = checkVector(Ctx, 1))
    return E;
  if (Ctx.hasOperand(2)) {
    if (Error E = checkSameElementTypeAs(Ctx, 2, 0))
      return E;
    if (Error E = checkScalarLike(Ctx, 2))
      return E;
  }
  Expected<std::optional<SmallVector<unsigned, 4>>> Axes =
      getPadAxes(Ctx, Rank);
  if (!Axes)
    return Axes.takeError();
  SmallVector<Dim, 4> Shape(Data.getShape().begin(), Data.getShape().end());
  if (!*Axes) {
    // Unknown axes: any dimension may change.
    for (Dim &D : Shape)
      D = Dim();
    return Types{TensorType(Data.getElementType(), Shape)};
  }
  size_t Count = (*Axes)->size();
  std::optional<ShapeValue> Pads = Ctx.getShapeValue(1);
  const Dim &PadsLength = Ctx.getOperandType(1).getDim(0);
  if ((PadsLength.isStatic() && PadsLength.getSize() != int64_t(2 * Count)) ||
      (Pads && Pads->size() != 2 * Count))
    return Ctx.error(describe(Ctx, 1) + " must have " + Twine(2 * Count) +
                     " entries, a begin and an end for each of " +
                     Twine(Count) + " axes");
  for (size_t I = 0; I != Count; ++I) {
    unsigned Axis = (**Axes)[I];
    Dim &D = Shape[Axis];
    if (!Pads || !(*Pads)[I].Int || !(*Pads)[I + Count].Int) {
      D = Dim();
      continue;
    }
    int64_t Begin = *(*Pads)[I].Int, End = *(*Pads)[I + Count].Int;
    int64_t Added = Begin + End;
    if (D.isStatic()) {
      int64_t Size = D.getSize() + Added;
      if (Size < 0)
        return Ctx.error("pads " + Twine(Begin) + " and " + Twine(End) +
                         " leave axis " + Twine(Axis) + " of " +
                         describe(Ctx, 0) + " with " + Twine(Size) +
                         " elements");
      if (*Mode != "constant" && D.getSize() == 0 && Size > 0)
        return Ctx.error("mode '" + *Mode + "' cannot pad axis " + Twine(Axis) +
                         " of " + describe(Ctx, 0) + ", which is empty");
      D = Dim::get(Size);
    } else if (Added != 0) {
      D = Added > 0 ? addDims(D, Dim::get(Added)) : Dim();
    }
  }
  return Types{TensorType(Data.getElementType(), Shape)};
}

/// The last dimension of operand I (indices of GatherND, ScatterND): how
/// many leading data axes each index tuple names. It must be static.
static Expected<int64_t> getIndexDepth(const ShapeContext &Ctx, unsigned I,
                                       unsigned MaxDepth) {
  if (Error E = checkIndexType(Ctx, I))
    return E;
  const TensorType &T = Ctx.getOperandType(I);
  if (T.getRank() == 0)
    return Ctx.error(describe(Ctx, I) + " must have at least one dimension");
  const Dim &Last = T.getDim(T.getRank() - 1);
  if (!Last.isStatic())
    return Ctx.error("the last dimension of " + describe(Ctx, I) +
                     " must be static");
  int64_t Depth = Last.getSize();
  if (Depth < 1 || Depth > int64_t(MaxDepth))
    return Ctx.error("the last dimension of " + describe(Ctx, I) +
                     " must be between 1 and " + Twine(MaxDepth));
  return Depth;
}

// indices [b..., m..., k] index data [b..., k axes, rest...] after
// batch_dims b: the result is [b..., m..., rest...].
InferResult autopar::inferGatherND(const ShapeContext &Ctx) {
  const TensorType &Data = Ctx.getOperandType(0);
  const TensorType &Indices = Ctx.getOperandType(1);
  int64_t Batch = Ctx.getIntAttr("batch_dims", 0);
  unsigned Rank = std::min(Data.getRank(), Indices.getRank());
  if (Batch < 0 || Batch >= int64_t(Rank))
    return Ctx.error("'batch_dims' " + Twine(Batch) +
                     " must be less than the ranks of " + describe(Ctx, 0) +
                     " and " + describe(Ctx, 1));
  Expected<int64_t> Depth = getIndexDepth(Ctx, 1, Data.getRank() - Batch);
  if (!Depth)
    return Depth.takeError();
  SmallVector<Dim, 4> Shape;
  for (unsigned I = 0; I != Batch; ++I) {
    Dim D = Indices.getDim(I);
    if (Error E = mergeDim(Ctx, D, Data.getDim(I),
                           "dimensions " + Twine(I) + " (batch)", 1, 0))
      return E;
    Shape.push_back(D);
  }
  for (unsigned I = Batch, E = Indices.getRank() - 1; I != E; ++I)
    Shape.push_back(Indices.getDim(I));
  for (unsigned I = Batch + *Depth, E = Data.getRank(); I != E; ++I)
    Shape.push_back(Data.getDim(I));
  return Types{TensorType(Data.getElementType(), Shape)};
}

// updates [m..., rest...] are written into a copy of data [k axes,
// rest...] at indices [m..., k].
InferResult autopar::inferScatterND(const ShapeContext &Ctx) {
  if (Expected<StringRef> R =
          getChoice(Ctx, "reduction", {"none", "add", "mul", "max", "min"});
      !R)
    return R.takeError();
  const TensorType &Data = Ctx.getOperandType(0);
  const TensorType &Indices = Ctx.getOperandType(1);
  const TensorType &Updates = Ctx.getOperandType(2);
  Expected<int64_t> Depth = getIndexDepth(Ctx, 1, Data.getRank());
  if (!Depth)
    return Depth.takeError();
  if (Error E = checkSameElementTypeAs(Ctx, 2, 0))
    return E;
  SmallVector<Dim, 4> Want(Indices.getShape().drop_back().begin(),
                           Indices.getShape().drop_back().end());
  for (unsigned I = *Depth, E = Data.getRank(); I != E; ++I)
    Want.push_back(Data.getDim(I));
  bool Matches = Updates.getRank() == Want.size();
  for (unsigned I = 0; Matches && I != Want.size(); ++I)
    Matches = mayEqual(Updates.getDim(I), Want[I]);
  if (!Matches)
    return Ctx.error(describe(Ctx, 2) + " must have shape " + dimsStr(Want) +
                     " (indices' leading dimensions, "
                     "then data's after the indexed ones)");
  return Types{Data};
}

/// The positive `blocksize` of SpaceToDepth and DepthToSpace, after checking
/// that the input is 4-D.
static Expected<int64_t> getBlockSize(const ShapeContext &Ctx) {
  if (Error E = checkRank(Ctx, 0, 4))
    return E;
  int64_t Block = Ctx.getIntAttr("blocksize", 0);
  if (Block <= 0)
    return Ctx.error("'blocksize' must be positive, got " + Twine(Block));
  return Block;
}

/// D / By; an error when D is static and not a multiple, unknown when the
/// quotient is not a monomial.
static Expected<Dim> divideDim(const ShapeContext &Ctx, const Dim &D,
                               int64_t By, const Twine &What) {
  if (D.isStatic() && D.getSize() % By != 0)
    return Ctx.error(What + " " + Twine(D.getSize()) + " of " +
                     describe(Ctx, 0) + " is not a multiple of " + Twine(By));
  if (D.isUnknown())
    return Dim();
  return D.divide(Dim::get(By)).value_or(Dim());
}

// [N, C, H, W] to [N, C * b * b, H / b, W / b].
InferResult autopar::inferSpaceToDepth(const ShapeContext &Ctx) {
  Expected<int64_t> Block = getBlockSize(Ctx);
  if (!Block)
    return Block.takeError();
  const TensorType &In = Ctx.getOperandType(0);
  Expected<Dim> H = divideDim(Ctx, In.getDim(2), *Block, "height");
  if (!H)
    return H.takeError();
  Expected<Dim> W = divideDim(Ctx, In.getDim(3), *Block, "width");
  if (!W)
    return W.takeError();
  return Types{TensorType(
      In.getElementType(),
      {In.getDim(0), In.getDim(1) * Dim::get(*Block * *Block), *H, *W})};
}

// [N, C, H, W] to [N, C / (b * b), H * b, W * b].
InferResult autopar::inferDepthToSpace(const ShapeContext &Ctx) {
  if (Expected<StringRef> M = getChoice(Ctx, "mode", {"DCR", "CRD"}); !M)
    return M.takeError();
  Expected<int64_t> Block = getBlockSize(Ctx);
  if (!Block)
    return Block.takeError();
  const TensorType &In = Ctx.getOperandType(0);
  Expected<Dim> C = divideDim(Ctx, In.getDim(1), *Block * *Block, "channels");
  if (!C)
    return C.takeError();
  Dim By = Dim::get(*Block);
  return Types{
      TensorType(In.getElementType(),
                 {In.getDim(0), *C, In.getDim(2) * By, In.getDim(3) * By})};
}

// A 2-D input's shape, of element type `dtype` (the input's when absent).
InferResult autopar::inferEyeLike(const ShapeContext &Ctx) {
  if (Error E = checkRank(Ctx, 0, 2))
    return E;
  ElementType Ty = elementTypeOf(Ctx, 0);
  if (const Attribute *A = Ctx.getAttr("dtype")) {
    std::optional<ElementType> To = parseElementTypeName(A->getString());
    if (!To)
      return Ctx.error("'dtype' is not an element type: '" + A->getString() +
                       "'");
    Ty = *To;
  }
  return Types{TensorType(Ty, Ctx.getOperandType(0).getShape())};
}

/// OneHot's depth when it is a constant: an integer, or a float truncated
/// as ONNX says.
static std::optional<int64_t> getConstantDepth(const ShapeContext &Ctx) {
  const DenseTensor *C = Ctx.getConstantOperand(1);
  if (!C || C->size() != 1)
    return std::nullopt;
  return C->isFloat() ? int64_t(C->getFloats()[0]) : C->getInts()[0];
}

// indices [...] to [..., depth, ...] with depth inserted at `axis`, of the
// element type of values [off, on].
InferResult autopar::inferOneHot(const ShapeContext &Ctx) {
  for (unsigned I : {0u, 1u})
    if (elementTypeOf(Ctx, I) == ElementType::Bool)
      return Ctx.error(describe(Ctx, I) + " must be numeric");
  if (Error E = checkScalarLike(Ctx, 1))
    return E;
  const TensorType &Values = Ctx.getOperandType(2);
  if (Values.getRank() != 1 || !mayEqual(Values.getDim(0), Dim::get(2)))
    return Ctx.error(describe(Ctx, 2) + " must be [off, on], of shape [2]");
  const TensorType &Indices = Ctx.getOperandType(0);
  Expected<unsigned> Axis =
      normalizeAxis(Ctx, Ctx.getIntAttr("axis", -1), Indices.getRank() + 1);
  if (!Axis)
    return Axis.takeError();
  Dim Depth;
  if (std::optional<int64_t> D = getConstantDepth(Ctx)) {
    if (*D < 1)
      return Ctx.error("depth must be positive, got " + Twine(*D));
    Depth = Dim::get(*D);
  }
  SmallVector<Dim, 4> Shape(Indices.getShape().begin(),
                            Indices.getShape().end());
  Shape.insert(Shape.begin() + *Axis, Depth);
  return Types{TensorType(Values.getElementType(), Shape)};
}

// input [.., batch, .., time, ..] with batch_axis and time_axis 0 and 1 in
// either order, sequence_lens [batch] i64: a result like input.
InferResult autopar::inferReverseSequence(const ShapeContext &Ctx) {
  const TensorType &In = Ctx.getOperandType(0);
  if (In.getRank() < 2)
    return Ctx.error(describe(Ctx, 0) +
                     " must have a batch and a time dimension");
  int64_t Batch = Ctx.getIntAttr("batch_axis", 1),
          Time = Ctx.getIntAttr("time_axis", 0);
  if (!((Batch == 0 && Time == 1) || (Batch == 1 && Time == 0)))
    return Ctx.error("'batch_axis' and 'time_axis' must be 0 and 1 in either "
                     "order, got " +
                     Twine(Batch) + " and " + Twine(Time));
  if (Error E = checkElementType(Ctx, 1, ElementType::I64))
    return E;
  if (Error E = checkVector(Ctx, 1))
    return E;
  if (!mayEqual(dimOf(Ctx, 1, 0), In.getDim(Batch)))
    return Ctx.error(describe(Ctx, 1) + " must have one entry per batch " +
                     "entry, " + dimStr(In.getDim(Batch)));
  return Types{In};
}
