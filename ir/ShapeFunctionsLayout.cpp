//===- ShapeFunctionsLayout.cpp - Shapes, layouts and data movement -------===//
//
// Shape functions of the ops that create, cut, combine and rearrange tensors
// (ConstantOfShape, Range, Size, Flatten, Split, Slice, GatherElements,
// ScatterElements, Squeeze, Expand, Tile, TopK), and the folders of the ones
// that exporters use for shape arithmetic (ConstantOfShape, Range, Slice,
// Expand). Semantics follow the ONNX operators at the newest opset.
//
//===----------------------------------------------------------------------===//

#include "ir/Folders.h"
#include "ir/Graph.h"
#include "ir/ShapeFunctions.h"

#include "llvm/ADT/STLExtras.h"
#include "llvm/Support/MathExtras.h"

#include <algorithm>
#include <cmath>
#include <cstdint>

using namespace autopar;
using namespace llvm;

/// Shape operands longer than this are rejected rather than allocated.
constexpr int64_t MaxRank = 256;

/// ONNX recommends INT_MAX (INT_MIN) as the end of a slice that runs to the
/// end (the beginning) of a dimension of unknown size. A slice bound at or
/// beyond these is taken to reach past every dimension whose size is not
/// known, that is, such dimensions are assumed smaller than 2^31.
constexpr int64_t SliceToEnd = INT32_MAX;
constexpr int64_t SliceToBegin = INT32_MIN;

using TypeList = SmallVector<TensorType, 1>;

//===----------------------------------------------------------------------===//
// Helpers
//===----------------------------------------------------------------------===//

/// The length of a 1-D tensor when it is static.
static std::optional<int64_t> getStaticLength(const TensorType &T) {
  if (T.getRank() != 1 || !T.getDim(0).isStatic())
    return std::nullopt;
  return T.getDim(0).getSize();
}

/// An error unless operand I, named Name, is a 1-D i64 tensor.
static Error checkI64Vector(const ShapeContext &Ctx, unsigned I,
                            StringRef Name) {
  const TensorType &T = Ctx.getOperandType(I);
  if (T.getElementType() != ElementType::I64 || T.getRank() != 1)
    return Ctx.error("'" + Name + "' must be i64[N], got " + typeStr(Ctx, I));
  return Error::success();
}

/// An error when a constant operand I, named Name, has a negative entry.
static Error checkNonNegativeEntries(const ShapeContext &Ctx, unsigned I,
                                     StringRef Name) {
  if (const DenseTensor *C = Ctx.getConstantOperand(I))
    for (int64_t V : C->getInts())
      if (V < 0)
        return Ctx.error("'" + Name + "' entry " + Twine(V) + " is negative");
  return Error::success();
}

/// The value of a 1-D shape operand I, named Name, as dimensions: known
/// entries where getShapeOperand knows them, else unknown dimensions as many
/// as the operand's static length. An error for negative constant entries,
/// an unknown length, or more than MaxRank entries.
static Expected<SmallVector<Dim, 4>>
getTargetShape(const ShapeContext &Ctx, unsigned I, StringRef Name) {
  if (Error E = checkI64Vector(Ctx, I, Name))
    return E;
  if (Error E = checkNonNegativeEntries(Ctx, I, Name))
    return E;
  std::optional<int64_t> Length = getStaticLength(Ctx.getOperandType(I));
  std::optional<SmallVector<Dim, 4>> Dims = Ctx.getShapeOperand(I);
  if (Dims)
    Length = Dims->size();
  if (!Length)
    return Ctx.error("'" + Name +
                     "' must have a static length to give the result's "
                     "rank, got " +
                     typeStr(Ctx, I));
  if (*Length > MaxRank)
    return Ctx.error("'" + Name + "' has " + Twine(*Length) +
                     " entries; at most " + Twine(MaxRank) + " are supported");
  if (Dims)
    return *Dims;
  return SmallVector<Dim, 4>(*Length, Dim());
}

/// An error unless the int attribute Name, when given, is 0 or 1.
static Error checkFlag(const ShapeContext &Ctx, StringRef Name) {
  int64_t V = Ctx.getIntAttr(Name, 0);
  if (V != 0 && V != 1)
    return Ctx.error("'" + Name + "' must be 0 or 1, got " + Twine(V));
  return Error::success();
}

/// ceil(A / B) for A >= 0 and B > 0, without overflow.
static uint64_t ceilDiv(uint64_t A, uint64_t B) { return A / B + (A % B != 0); }

//===----------------------------------------------------------------------===//
// Creating tensors: ConstantOfShape, Range, Size
//===----------------------------------------------------------------------===//

// ONNX ConstantOfShape: the given shape filled with the one element of
// `value` (an f32 zero by default).
InferResult autopar::inferConstantOfShape(const ShapeContext &Ctx) {
  ElementType Elem = ElementType::F32;
  if (const Attribute *Value = Ctx.getAttr("value")) {
    const TensorType &ValueType = Value->getTensor().getType();
    if (ValueType.getStaticNumElements() != 1)
      return Ctx.error("'value' must have exactly one element, got " +
                       ValueType.str());
    Elem = ValueType.getElementType();
  }
  Expected<SmallVector<Dim, 4>> Shape = getTargetShape(Ctx, 0, "input");
  if (!Shape)
    return Shape.takeError();
  return TypeList{TensorType(Elem, *Shape)};
}

/// The element types ONNX's Range takes that autopar has.
static bool isRangeElementType(ElementType Ty) {
  return Ty == ElementType::F32 || Ty == ElementType::F64 ||
         Ty == ElementType::I32 || Ty == ElementType::I64;
}

/// max(ceil((Limit - Start) / Delta), 0) for Delta != 0; nullopt when it
/// overflows.
static std::optional<int64_t> getRangeLength(int64_t Start, int64_t Limit,
                                             int64_t Delta) {
  int64_t Diff;
  if (SubOverflow(Limit, Start, Diff) || (Diff == INT64_MIN && Delta == -1))
    return std::nullopt;
  int64_t Quotient = Diff / Delta, Remainder = Diff % Delta;
  // C++ division truncates; round up when the exact quotient is positive.
  if (Remainder != 0 && (Remainder < 0) == (Delta < 0))
    ++Quotient;
  return std::max<int64_t>(Quotient, 0);
}

/// The same for floating-point operands: as onnxruntime does, the difference
/// is taken in the element type and the quotient in double. Nullopt when the
/// length is not a finite int64_t.
static std::optional<int64_t> getRangeLength(double Start, double Limit,
                                             double Delta, ElementType Ty) {
  double Diff = Ty == ElementType::F32 ? double(float(Limit) - float(Start))
                                       : Limit - Start;
  double Length = std::ceil(Diff / Delta);
  if (std::isnan(Length) || Length >= 0x1p63)
    return std::nullopt;
  return Length <= 0 ? 0 : int64_t(Length);
}

/// The length of a Range with constant operands; unknown otherwise. A zero
/// constant delta is an error whatever the other operands are.
static Expected<Dim> getRangeDim(const ShapeContext &Ctx) {
  const DenseTensor *Delta = Ctx.getConstantOperand(2);
  if (Delta && (Delta->isFloat() ? Delta->getFloats()[0] == 0
                                 : Delta->getInts()[0] == 0))
    return Ctx.error("'delta' must not be 0");
  const DenseTensor *Start = Ctx.getConstantOperand(0);
  const DenseTensor *Limit = Ctx.getConstantOperand(1);
  // Range(0, n, 1) with n a (symbolic) dimension, as position ids are
  // computed from Shape: n elements.
  if (Start && Delta && !Start->isFloat() && !Delta->isFloat() &&
      Start->getInts()[0] == 0 && Delta->getInts()[0] == 1)
    if (std::optional<SmallVector<Dim, 4>> N = Ctx.getShapeOperand(1))
      if (N->size() == 1)
        return N->front();
  if (!Start || !Limit || !Delta)
    return Dim();
  std::optional<int64_t> Length =
      Delta->isFloat()
          ? getRangeLength(Start->getFloats()[0], Limit->getFloats()[0],
                           Delta->getFloats()[0],
                           Delta->getType().getElementType())
          : getRangeLength(Start->getInts()[0], Limit->getInts()[0],
                           Delta->getInts()[0]);
  return Length ? Dim::get(*Length) : Dim();
}

// ONNX Range: a 1-D tensor of max(ceil((limit - start) / delta), 0) elements.
InferResult autopar::inferRange(const ShapeContext &Ctx) {
  static const char *const Names[] = {"start", "limit", "delta"};
  for (unsigned I = 0; I != 3; ++I)
    if (Ctx.getOperandType(I).getRank() != 0)
      return Ctx.error("'" + Twine(Names[I]) + "' must be a scalar, got " +
                       typeStr(Ctx, I));
  if (Error E = checkSameElementType(Ctx))
    return E;
  ElementType Elem = Ctx.getOperandType(0).getElementType();
  if (!isRangeElementType(Elem))
    return Ctx.error("operands must be f32, f64, i32 or i64, got " +
                     typeStr(Ctx, 0));
  Expected<Dim> Length = getRangeDim(Ctx);
  if (!Length)
    return Length.takeError();
  return TypeList{TensorType(Elem, {*Length})};
}

InferResult autopar::inferSize(const ShapeContext &) {
  return TypeList{TensorType::get(ElementType::I64, {})};
}

//===----------------------------------------------------------------------===//
// Reshaping: Flatten, Squeeze
//===----------------------------------------------------------------------===//

/// The product of Dims (a monomial, or unknown).
static Dim getProduct(ArrayRef<Dim> Dims) {
  Dim Product = Dim::get(1);
  for (const Dim &D : Dims)
    Product = Product * D;
  return Product;
}

// ONNX Flatten: [d0 * ... * d(axis-1), d(axis) * ... * d(n-1)], with axis in
// [-rank, rank].
InferResult autopar::inferFlatten(const ShapeContext &Ctx) {
  const TensorType &In = Ctx.getOperandType(0);
  int64_t Rank = In.getRank();
  int64_t Axis = Ctx.getIntAttr("axis", 1);
  if (Axis < -Rank || Axis > Rank)
    return Ctx.error("axis " + Twine(Axis) + " is out of range [" +
                     Twine(-Rank) + ", " + Twine(Rank) + "] for " +
                     typeStr(Ctx, 0));
  if (Axis < 0)
    Axis += Rank;
  ArrayRef<Dim> Shape = In.getShape();
  return TypeList{
      TensorType(In.getElementType(), {getProduct(Shape.take_front(Axis)),
                                       getProduct(Shape.drop_front(Axis))})};
}

// ONNX Squeeze: removes the given axes, which must be 1, or without axes
// every dimension that is 1.
InferResult autopar::inferSqueeze(const ShapeContext &Ctx) {
  const TensorType &In = Ctx.getOperandType(0);
  if (Ctx.getAttr("axes") && Ctx.hasOperand(1))
    return Ctx.error("axes are given both as an attribute and an operand");
  if (Ctx.hasOperand(1))
    if (Error E = checkI64Vector(Ctx, 1, "axes"))
      return E;
  std::optional<std::vector<int64_t>> Axes = getAxes(Ctx);
  if (!Axes)
    return Ctx.error("axes must be constant");
  unsigned Rank = In.getRank();
  SmallVector<bool, 4> Squeezed(Rank, false);
  if (Axes->empty()) {
    for (unsigned I = 0; I != Rank; ++I) {
      const Dim &D = In.getDim(I);
      if (!D.isStatic())
        return Ctx.error("cannot squeeze " + typeStr(Ctx, 0) +
                         " without axes: dimension " + Twine(I) +
                         " is not static");
      Squeezed[I] = D.getSize() == 1;
    }
  }
  for (int64_t Axis : *Axes) {
    Expected<unsigned> A = normalizeAxis(Ctx, Axis, Rank);
    if (!A)
      return A.takeError();
    if (Squeezed[*A])
      return Ctx.error("axis " + Twine(Axis) + " is repeated");
    const Dim &D = In.getDim(*A);
    if (D.isStatic() && D.getSize() != 1)
      return Ctx.error("cannot squeeze dimension " + Twine(*A) + " of " +
                       typeStr(Ctx, 0) + ": it is not 1");
    Squeezed[*A] = true;
  }
  SmallVector<Dim, 4> Shape;
  for (unsigned I = 0; I != Rank; ++I)
    if (!Squeezed[I])
      Shape.push_back(In.getDim(I));
  return TypeList{TensorType(In.getElementType(), Shape)};
}

//===----------------------------------------------------------------------===//
// Cutting: Split, Slice, TopK
//===----------------------------------------------------------------------===//

/// The sizes of NumParts chunks of dimension D. With Uneven (Split's
/// `num_outputs`), chunks are ceil(D / NumParts) and the last one takes the
/// rest; otherwise D must divide evenly.
static Expected<SmallVector<Dim, 4>> getChunkSizes(const ShapeContext &Ctx,
                                                   const Dim &D,
                                                   int64_t NumParts,
                                                   bool Uneven) {
  if (!D.isStatic()) {
    // A symbolic dimension splits exactly (2*batch into 2) or not at all.
    std::optional<Dim> Chunk = D.divide(Dim::get(NumParts));
    return SmallVector<Dim, 4>(NumParts, Chunk ? *Chunk : Dim());
  }
  int64_t Size = D.getSize();
  if (Size % NumParts == 0)
    return SmallVector<Dim, 4>(NumParts, Dim::get(Size / NumParts));
  if (!Uneven)
    return Ctx.error("the axis dimension of " + typeStr(Ctx, 0) +
                     " does not split evenly into " + Twine(NumParts) +
                     " parts");
  int64_t Chunk = ceilDiv(Size, NumParts), Used;
  if (MulOverflow(Chunk, NumParts - 1, Used) || Used > Size)
    return Ctx.error("the axis dimension of " + typeStr(Ctx, 0) +
                     " cannot be split into " + Twine(NumParts) + " parts of " +
                     Twine(Chunk));
  SmallVector<Dim, 4> Sizes(NumParts - 1, Dim::get(Chunk));
  Sizes.push_back(Dim::get(Size - Used));
  return Sizes;
}

/// The sizes given by Split's `split` operand.
static Expected<SmallVector<Dim, 4>>
getSplitSizes(const ShapeContext &Ctx, const Dim &D, unsigned NumResults) {
  if (Error E = checkI64Vector(Ctx, 1, "split"))
    return E;
  std::optional<int64_t> Length = getStaticLength(Ctx.getOperandType(1));
  if (Length && *Length != NumResults)
    return Ctx.error("'split' " + typeStr(Ctx, 1) + " has " + Twine(*Length) +
                     " entries but the node has " + Twine(NumResults) +
                     " results");
  const DenseTensor *Split = Ctx.getConstantOperand(1);
  if (!Split)
    return SmallVector<Dim, 4>(NumResults, Dim());
  if (Error E = checkNonNegativeEntries(Ctx, 1, "split"))
    return E;
  SmallVector<Dim, 4> Sizes;
  int64_t Sum = 0;
  bool Overflow = false;
  for (int64_t S : Split->getInts()) {
    Overflow |= AddOverflow(Sum, S, Sum);
    Sizes.push_back(Dim::get(S));
  }
  if (D.isStatic() && (Overflow || Sum != D.getSize()))
    return Ctx.error("'split' entries do not sum to the axis dimension of " +
                     typeStr(Ctx, 0));
  return Sizes;
}

/// The sizes of Split's results along the axis, dimension D.
static Expected<SmallVector<Dim, 4>>
getSplitResultSizes(const ShapeContext &Ctx, const Dim &D) {
  unsigned NumResults = Ctx.getNode().getNumResults();
  const Attribute *NumOutputs = Ctx.getAttr("num_outputs");
  if (Ctx.hasOperand(1)) {
    if (NumOutputs)
      return Ctx.error("'split' and 'num_outputs' are both given");
    return getSplitSizes(Ctx, D, NumResults);
  }
  if (!NumOutputs)
    return getChunkSizes(Ctx, D, NumResults, /*Uneven=*/false);
  if (NumOutputs->getInt() != NumResults)
    return Ctx.error("'num_outputs' is " + Twine(NumOutputs->getInt()) +
                     " but the node has " + Twine(NumResults) + " results");
  return getChunkSizes(Ctx, D, NumResults, /*Uneven=*/true);
}

// ONNX Split (opset 18): sizes from the `split` operand, else `num_outputs`
// chunks of ceil(d / num_outputs) with a smaller last one, else an even split
// into the node's results.
InferResult autopar::inferSplit(const ShapeContext &Ctx) {
  const TensorType &In = Ctx.getOperandType(0);
  Expected<unsigned> Axis =
      normalizeAxis(Ctx, Ctx.getIntAttr("axis", 0), In.getRank());
  if (!Axis)
    return Axis.takeError();
  Expected<SmallVector<Dim, 4>> Sizes =
      getSplitResultSizes(Ctx, In.getDim(*Axis));
  if (!Sizes)
    return Sizes.takeError();
  TypeList Types;
  SmallVector<Dim, 4> Shape(In.getShape().begin(), In.getShape().end());
  for (const Dim &Size : *Sizes) {
    Shape[*Axis] = Size;
    Types.push_back(TensorType(In.getElementType(), Shape));
  }
  return Types;
}

namespace {
/// One axis of a slice after ONNX's clamping: the first index taken, the
/// step, and how many indices are taken.
struct SliceAxis {
  int64_t Start;
  int64_t Step;
  int64_t Size;
};
} // namespace

/// Clamps a slice of a dimension of static size D as ONNX Slice does:
/// negative bounds count from the end; starts clamp to [0, D] ([0, D - 1]
/// for negative steps), ends to [0, D] ([-1, D - 1]).
static SliceAxis clampSlice(int64_t D, int64_t Start, int64_t End,
                            int64_t Step) {
  if (D == 0)
    return {0, Step, 0};
  if (Start < 0)
    Start += D;
  if (End < 0)
    End += D;
  if (Step > 0) {
    Start = std::clamp<int64_t>(Start, 0, D);
    End = std::clamp<int64_t>(End, 0, D);
    int64_t Size = End > Start ? ceilDiv(End - Start, Step) : 0;
    return {Start, Step, Size};
  }
  Start = std::clamp<int64_t>(Start, 0, D - 1);
  End = std::clamp<int64_t>(End, -1, D - 1);
  // -Step overflows for INT64_MIN; its magnitude as unsigned does not.
  uint64_t Magnitude = 0 - uint64_t(Step);
  int64_t Size = Start > End ? ceilDiv(Start - End, Magnitude) : 0;
  return {Start, Step, Size};
}

/// The size of dimension D sliced by [Start, End) with Step. Dimensions of
/// unknown size are known after a slice of all of them (forward or
/// backward, see SliceToEnd) or of none of them.
static Dim sliceDim(const Dim &D, int64_t Start, int64_t End, int64_t Step) {
  if (D.isStatic())
    return Dim::get(clampSlice(D.getSize(), Start, End, Step).Size);
  // Forward from the first index to past the last, or backward from the
  // last index (-1 is the last, as in a flip) to before the first.
  bool FromFirst = Start == 0 || Start <= -SliceToEnd;
  if (Step == 1 && FromFirst && End >= SliceToEnd)
    return D;
  bool FromLast = Start == -1 || Start >= SliceToEnd;
  if (Step == -1 && FromLast && End <= SliceToBegin)
    return D;
  if (Step > 0 && Start >= 0 && End >= 0 && End <= Start)
    return Dim::get(0);
  return Dim();
}

/// Checks Slice's index operands: 1-D, i32 or i64 alike, of equal length.
static Error checkSliceOperands(const ShapeContext &Ctx) {
  static const char *const Names[] = {"", "starts", "ends", "axes", "steps"};
  std::optional<unsigned> First;
  for (unsigned I = 1; I != 5; ++I) {
    if (!Ctx.hasOperand(I))
      continue;
    const TensorType &T = Ctx.getOperandType(I);
    if (!isIntegerElementType(T.getElementType()) || T.getRank() != 1)
      return Ctx.error("'" + Twine(Names[I]) +
                       "' must be a 1-D i32 or i64 tensor, got " +
                       typeStr(Ctx, I));
    if (!First) {
      First = I;
      continue;
    }
    const TensorType &F = Ctx.getOperandType(*First);
    if (T.getElementType() != F.getElementType())
      return Ctx.error("'" + Twine(Names[I]) + "' " + typeStr(Ctx, I) +
                       " and '" + Names[*First] + "' " + typeStr(Ctx, *First) +
                       " differ in element type");
    std::optional<int64_t> LT = getStaticLength(T), LF = getStaticLength(F);
    if (LT && LF && *LT != *LF)
      return Ctx.error("'" + Twine(Names[I]) + "' " + typeStr(Ctx, I) +
                       " and '" + Names[*First] + "' " + typeStr(Ctx, *First) +
                       " differ in length");
  }
  return Error::success();
}

/// The dimensions Slice cuts, normalized: the constant `axes`, else the
/// first ones, as many as `starts` has entries. Nullopt when not known.
static Expected<std::optional<SmallVector<unsigned, 4>>>
getSliceAxes(const ShapeContext &Ctx, unsigned Rank) {
  SmallVector<unsigned, 4> Axes;
  if (Ctx.hasOperand(3)) {
    const DenseTensor *C = Ctx.getConstantOperand(3);
    if (!C)
      return std::nullopt;
    SmallVector<bool, 4> Seen(Rank, false);
    for (int64_t Axis : C->getInts()) {
      Expected<unsigned> A = normalizeAxis(Ctx, Axis, Rank);
      if (!A)
        return A.takeError();
      if (Seen[*A])
        return Ctx.error("axis " + Twine(Axis) + " is repeated");
      Seen[*A] = true;
      Axes.push_back(*A);
    }
    return Axes;
  }
  std::optional<int64_t> Length = getStaticLength(Ctx.getOperandType(1));
  if (!Length)
    return std::nullopt;
  if (*Length > int64_t(Rank))
    return Ctx.error("'starts' " + typeStr(Ctx, 1) + " has more entries than " +
                     typeStr(Ctx, 0) + " has dimensions");
  for (int64_t I = 0; I != *Length; ++I)
    Axes.push_back(I);
  return Axes;
}

/// An error when a constant `steps` has a zero entry.
static Error checkSliceSteps(const ShapeContext &Ctx) {
  if (const DenseTensor *Steps = Ctx.getConstantOperand(4))
    if (is_contained(Steps->getInts(), 0))
      return Ctx.error("'steps' must not have a zero entry");
  return Error::success();
}

// ONNX Slice: each axis in `axes` is cut to [start, end) by step, after
// clamping; see clampSlice.
InferResult autopar::inferSlice(const ShapeContext &Ctx) {
  const TensorType &In = Ctx.getOperandType(0);
  if (Error E = checkSliceOperands(Ctx))
    return E;
  if (Error E = checkSliceSteps(Ctx))
    return E;
  auto Axes = getSliceAxes(Ctx, In.getRank());
  if (!Axes)
    return Axes.takeError();
  SmallVector<Dim, 4> Shape(In.getShape().begin(), In.getShape().end());
  if (!*Axes) {
    // Any dimension may be cut.
    return TypeList{TensorType(In.getElementType(),
                               SmallVector<Dim, 4>(In.getRank(), Dim()))};
  }
  const DenseTensor *Starts = Ctx.getConstantOperand(1);
  const DenseTensor *Ends = Ctx.getConstantOperand(2);
  const DenseTensor *Steps = Ctx.getConstantOperand(4);
  bool Known = Starts && Ends && (Steps || !Ctx.hasOperand(4));
  for (unsigned I = 0, E = (*Axes)->size(); I != E; ++I) {
    unsigned Axis = (**Axes)[I];
    Shape[Axis] =
        Known ? sliceDim(In.getDim(Axis), Starts->getInts()[I],
                         Ends->getInts()[I], Steps ? Steps->getInts()[I] : 1)
              : Dim();
  }
  return TypeList{TensorType(In.getElementType(), Shape)};
}

// ONNX TopK: the K largest (or smallest) entries along axis, and their i64
// indices.
InferResult autopar::inferTopK(const ShapeContext &Ctx) {
  const TensorType &X = Ctx.getOperandType(0), &K = Ctx.getOperandType(1);
  for (StringRef Flag : {"largest", "sorted"})
    if (Error E = checkFlag(Ctx, Flag))
      return E;
  Expected<unsigned> Axis =
      normalizeAxis(Ctx, Ctx.getIntAttr("axis", -1), X.getRank());
  if (!Axis)
    return Axis.takeError();
  if (K != TensorType::get(ElementType::I64, {1}))
    return Ctx.error("'K' must be i64[1], got " + typeStr(Ctx, 1));
  SmallVector<Dim, 4> Shape(X.getShape().begin(), X.getShape().end());
  Shape[*Axis] = Dim();
  if (const DenseTensor *KValue = Ctx.getConstantOperand(1)) {
    int64_t Count = KValue->getInts()[0];
    const Dim &D = X.getDim(*Axis);
    if (Count < 0)
      return Ctx.error("'K' is " + Twine(Count) + "; it must not be negative");
    if (D.isStatic() && Count > D.getSize())
      return Ctx.error("'K' is " + Twine(Count) +
                       " but the axis dimension of " + typeStr(Ctx, 0) +
                       " is " + Twine(D.getSize()));
    Shape[*Axis] = Dim::get(Count);
  }
  return TypeList{TensorType(X.getElementType(), Shape),
                  TensorType(ElementType::I64, Shape)};
}

//===----------------------------------------------------------------------===//
// Indexing: GatherElements, ScatterElements
//===----------------------------------------------------------------------===//

/// Checks what GatherElements and ScatterElements share: integer indices of
/// the rank of data, and an axis in range.
static Error checkElementsIndexing(const ShapeContext &Ctx) {
  const TensorType &Data = Ctx.getOperandType(0);
  const TensorType &Indices = Ctx.getOperandType(1);
  if (!isIntegerElementType(Indices.getElementType()))
    return Ctx.error("indices must be i32 or i64, got " + typeStr(Ctx, 1));
  if (Indices.getRank() != Data.getRank())
    return Ctx.error("indices " + typeStr(Ctx, 1) + " and data " +
                     typeStr(Ctx, 0) + " differ in rank");
  Expected<unsigned> Axis =
      normalizeAxis(Ctx, Ctx.getIntAttr("axis", 0), Data.getRank());
  return Axis ? Error::success() : Axis.takeError();
}

// ONNX GatherElements: the result has the indices' shape.
InferResult autopar::inferGatherElements(const ShapeContext &Ctx) {
  if (Error E = checkElementsIndexing(Ctx))
    return E;
  return TypeList{TensorType(Ctx.getOperandType(0).getElementType(),
                             Ctx.getOperandType(1).getShape())};
}

// ONNX ScatterElements: updates, shaped like indices, are written into a
// copy of data.
InferResult autopar::inferScatterElements(const ShapeContext &Ctx) {
  if (const Attribute *Reduction = Ctx.getAttr("reduction")) {
    static const StringRef Reductions[] = {"none", "add", "mul", "max", "min"};
    StringRef R = Reduction->getString();
    if (!is_contained(Reductions, R))
      return Ctx.error("'reduction' must be none, add, mul, max or min, got "
                       "\"" +
                       R + "\"");
  }
  if (Error E = checkElementsIndexing(Ctx))
    return E;
  const TensorType &Data = Ctx.getOperandType(0);
  const TensorType &Indices = Ctx.getOperandType(1);
  const TensorType &Updates = Ctx.getOperandType(2);
  if (Updates.getElementType() != Data.getElementType())
    return Ctx.error("updates " + typeStr(Ctx, 2) + " and data " +
                     typeStr(Ctx, 0) + " differ in element type");
  if (!isCompatible(TensorType(Indices.getElementType(), Updates.getShape()),
                    Indices))
    return Ctx.error("updates " + typeStr(Ctx, 2) + " and indices " +
                     typeStr(Ctx, 1) + " differ in shape");
  return TypeList{Data};
}

//===----------------------------------------------------------------------===//
// Repeating: Expand, Tile
//===----------------------------------------------------------------------===//

// ONNX Expand: input and shape broadcast against each other (a 1 in shape
// keeps the input's dimension).
InferResult autopar::inferExpand(const ShapeContext &Ctx) {
  const TensorType &In = Ctx.getOperandType(0);
  Expected<SmallVector<Dim, 4>> Target = getTargetShape(Ctx, 1, "shape");
  if (!Target)
    return Target.takeError();
  std::optional<SmallVector<Dim, 4>> Shape =
      broadcastShapes(In.getShape(), *Target, Ctx);
  if (!Shape)
    return Ctx.error("input " + typeStr(Ctx, 0) +
                     " does not broadcast to shape " + dimsStr(*Target));
  return TypeList{TensorType(In.getElementType(), *Shape)};
}

// ONNX Tile: dimension i is repeated repeats[i] times.
InferResult autopar::inferTile(const ShapeContext &Ctx) {
  const TensorType &In = Ctx.getOperandType(0);
  if (Error E = checkI64Vector(Ctx, 1, "repeats"))
    return E;
  std::optional<int64_t> Length = getStaticLength(Ctx.getOperandType(1));
  if (Length && *Length != int64_t(In.getRank()))
    return Ctx.error("'repeats' " + typeStr(Ctx, 1) +
                     " must have one entry per dimension of " +
                     typeStr(Ctx, 0));
  if (Error E = checkNonNegativeEntries(Ctx, 1, "repeats"))
    return E;
  SmallVector<Dim, 4> Shape(In.getRank(), Dim());
  if (const DenseTensor *Repeats = Ctx.getConstantOperand(1))
    for (unsigned I = 0, E = In.getRank(); I != E; ++I) {
      int64_t R = Repeats->getInts()[I];
      // Repeating zero times empties even a dimension of unknown size.
      Shape[I] = R == 0 ? Dim::get(0) : Dim::get(R) * In.getDim(I);
    }
  return TypeList{TensorType(In.getElementType(), Shape)};
}

//===----------------------------------------------------------------------===//
// Folders
//===----------------------------------------------------------------------===//

/// Operand I when it is given and an integer constant, else null.
static const DenseTensor *getIntOperand(ArrayRef<const DenseTensor *> Operands,
                                        unsigned I) {
  if (I >= Operands.size() || !Operands[I] || Operands[I]->isFloat())
    return nullptr;
  return Operands[I];
}

/// True when optional operand I of N is absent.
static bool isAbsent(const Node &N, unsigned I) {
  return I >= N.getNumOperands() || !N.getOperand(I);
}

/// Visits every multi-index of a static shape in row-major order.
static void forEachIndex(ArrayRef<int64_t> Sizes,
                         function_ref<void(ArrayRef<int64_t>)> Visit) {
  if (is_contained(Sizes, 0))
    return;
  SmallVector<int64_t, 4> Index(Sizes.size(), 0);
  do
    Visit(Index);
  while (nextRowMajorIndex(Index, Sizes));
}

FoldResult
autopar::foldConstantOfShape(const Node &N,
                             ArrayRef<const DenseTensor *> Operands) {
  std::optional<TensorType> Type = getFoldableResultType(N);
  const DenseTensor *Shape = getIntOperand(Operands, 0);
  const Attribute *Value = N.getAttr("value");
  if (!Type || !Shape || !Value || Value->getTensor().isFloat() ||
      Value->getTensor().size() != 1)
    return std::nullopt;
  if (Shape->getInts() != ArrayRef<int64_t>(Type->getStaticSizes()))
    return std::nullopt;
  return makeIntResult(*Type,
                       std::vector<int64_t>(*Type->getStaticNumElements(),
                                            Value->getTensor().getInts()[0]));
}

FoldResult autopar::foldRange(const Node &N,
                              ArrayRef<const DenseTensor *> Operands) {
  std::optional<TensorType> Type = getFoldableResultType(N);
  const DenseTensor *Start = getIntOperand(Operands, 0);
  const DenseTensor *Limit = getIntOperand(Operands, 1);
  const DenseTensor *Delta = getIntOperand(Operands, 2);
  if (!Type || !Start || !Limit || !Delta || Type->getRank() != 1 ||
      Delta->getInts()[0] == 0)
    return std::nullopt;
  int64_t First = Start->getInts()[0], Step = Delta->getInts()[0];
  std::optional<int64_t> Length =
      getRangeLength(First, Limit->getInts()[0], Step);
  if (!Length || *Length != Type->getDim(0).getSize())
    return std::nullopt;
  // Every value lies between start and limit, so none overflows.
  std::vector<int64_t> Values;
  for (int64_t I = 0; I != *Length; ++I)
    Values.push_back(First + I * Step);
  return makeIntResult(*Type, std::move(Values));
}

FoldResult autopar::foldSlice(const Node &N,
                              ArrayRef<const DenseTensor *> Operands) {
  std::optional<TensorType> Type = getFoldableResultType(N);
  const DenseTensor *Data = getIntOperand(Operands, 0);
  const DenseTensor *Starts = getIntOperand(Operands, 1);
  const DenseTensor *Ends = getIntOperand(Operands, 2);
  const DenseTensor *Axes = getIntOperand(Operands, 3);
  const DenseTensor *Steps = getIntOperand(Operands, 4);
  if (!Type || !Data || !Starts || !Ends || (!Axes && !isAbsent(N, 3)) ||
      (!Steps && !isAbsent(N, 4)))
    return std::nullopt;
  SmallVector<int64_t, 4> DataSizes = Data->getType().getStaticSizes();
  int64_t Rank = DataSizes.size(), Count = Starts->size();
  if (Ends->size() != size_t(Count) ||
      (Axes && Axes->size() != size_t(Count)) ||
      (Steps && Steps->size() != size_t(Count)) || Count > Rank)
    return std::nullopt;
  // Every dimension is taken whole unless an axis says otherwise.
  SmallVector<SliceAxis, 4> Slices;
  for (int64_t D : DataSizes)
    Slices.push_back({0, 1, D});
  for (int64_t I = 0; I != Count; ++I) {
    int64_t Axis = Axes ? Axes->getInts()[I] : I;
    int64_t Step = Steps ? Steps->getInts()[I] : 1;
    if (Axis < -Rank || Axis >= Rank || Step == 0)
      return std::nullopt;
    if (Axis < 0)
      Axis += Rank;
    Slices[Axis] = clampSlice(DataSizes[Axis], Starts->getInts()[I],
                              Ends->getInts()[I], Step);
  }
  SmallVector<int64_t, 4> OutSizes = Type->getStaticSizes();
  if (OutSizes.size() != size_t(Rank))
    return std::nullopt;
  for (int64_t I = 0; I != Rank; ++I)
    if (OutSizes[I] != Slices[I].Size)
      return std::nullopt;
  SmallVector<int64_t, 4> Strides = getRowMajorStrides(DataSizes);
  std::vector<int64_t> Values;
  forEachIndex(OutSizes, [&](ArrayRef<int64_t> Index) {
    int64_t Flat = 0;
    for (int64_t I = 0; I != Rank; ++I)
      Flat += (Slices[I].Start + Index[I] * Slices[I].Step) * Strides[I];
    Values.push_back(Data->getInts()[Flat]);
  });
  return makeIntResult(*Type, std::move(Values));
}

FoldResult autopar::foldExpand(const Node &N,
                               ArrayRef<const DenseTensor *> Operands) {
  std::optional<TensorType> Type = getFoldableResultType(N);
  const DenseTensor *Input = getIntOperand(Operands, 0);
  const DenseTensor *Shape = getIntOperand(Operands, 1);
  if (!Type || !Input || !Shape ||
      any_of(Shape->getInts(), [](int64_t S) { return S < 0; }))
    return std::nullopt;
  SmallVector<int64_t, 4> InSizes = Input->getType().getStaticSizes();
  SmallVector<Dim, 4> Target;
  for (int64_t S : Shape->getInts())
    Target.push_back(Dim::get(S));
  std::optional<SmallVector<Dim, 4>> Broadcast =
      broadcastShapes(Input->getType().getShape(), Target);
  if (!Broadcast || TensorType(Type->getElementType(), *Broadcast) != *Type)
    return std::nullopt;
  SmallVector<int64_t, 4> OutSizes = Type->getStaticSizes();
  SmallVector<int64_t, 4> Strides = getRowMajorStrides(InSizes);
  size_t Offset = OutSizes.size() - InSizes.size();
  std::vector<int64_t> Values;
  forEachIndex(OutSizes, [&](ArrayRef<int64_t> Index) {
    // A dimension of size 1 is repeated: it always reads index 0.
    int64_t Flat = 0;
    for (size_t I = 0; I != InSizes.size(); ++I)
      if (InSizes[I] != 1)
        Flat += Index[I + Offset] * Strides[I];
    Values.push_back(Input->getInts()[Flat]);
  });
  return makeIntResult(*Type, std::move(Values));
}
