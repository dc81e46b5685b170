//===- Folders.cpp - Constant folding of shape arithmetic -----------------===//

#include "ir/Folders.h"
#include "ir/Graph.h"
#include "ir/OpFacts.h"
#include "ir/ShapeFunctions.h"

#include "llvm/ADT/STLExtras.h"

#include <algorithm>
#include <climits>

using namespace autopar;
using namespace llvm;

/// The operand tensors when all are integer constants, else nullopt.
static std::optional<SmallVector<const DenseTensor *, 2>>
getIntOperands(ArrayRef<const DenseTensor *> Operands) {
  for (const DenseTensor *T : Operands)
    if (!T || T->isFloat())
      return std::nullopt;
  return SmallVector<const DenseTensor *, 2>(Operands.begin(), Operands.end());
}

/// The node's single result type when it is static and small enough.
std::optional<TensorType> autopar::getFoldableResultType(const Node &N) {
  const TensorType &T = N.getResult(0)->getType();
  if (!T.hasStaticShape() || isFloatElementType(T.getElementType()))
    return std::nullopt;
  std::optional<int64_t> Size = T.getStaticNumElements();
  if (!Size || *Size > MaxFoldedElements)
    return std::nullopt;
  return T;
}

FoldResult autopar::makeIntResult(TensorType Type,
                                  std::vector<int64_t> Values) {
  return SmallVector<DenseTensor, 1>{
      DenseTensor(std::move(Type), std::move(Values))};
}

/// Row-major strides of a static shape.
SmallVector<int64_t, 4> autopar::getRowMajorStrides(ArrayRef<int64_t> Sizes) {
  SmallVector<int64_t, 4> Strides(Sizes.size(), 1);
  for (int I = int(Sizes.size()) - 2; I >= 0; --I)
    Strides[I] = Strides[I + 1] * Sizes[I + 1];
  return Strides;
}

/// The flat index into an operand of shape Sizes, broadcast to OutSizes, of
/// the output element at multi-index Index.
static int64_t broadcastIndex(ArrayRef<int64_t> Index,
                              ArrayRef<int64_t> OutSizes,
                              ArrayRef<int64_t> Sizes) {
  SmallVector<int64_t, 4> Strides = getRowMajorStrides(Sizes);
  int64_t Flat = 0;
  size_t Offset = OutSizes.size() - Sizes.size();
  for (size_t I = 0; I != Sizes.size(); ++I)
    if (Sizes[I] != 1)
      Flat += Index[I + Offset] * Strides[I];
  return Flat;
}

/// Advances a row-major multi-index; returns false after the last one.
bool autopar::nextRowMajorIndex(MutableArrayRef<int64_t> Index,
                                ArrayRef<int64_t> Sizes) {
  for (int I = int(Sizes.size()) - 1; I >= 0; --I) {
    if (++Index[I] < Sizes[I])
      return true;
    Index[I] = 0;
  }
  return false;
}

/// Operand T's values broadcast (numpy-style) to the static shape OutSizes,
/// in row-major order; nullopt when T does not broadcast to it.
static std::optional<std::vector<int64_t>>
broadcastValues(const DenseTensor &T, ArrayRef<int64_t> OutSizes) {
  SmallVector<int64_t, 4> Sizes = T.getType().getStaticSizes();
  if (Sizes.size() > OutSizes.size())
    return std::nullopt;
  size_t Offset = OutSizes.size() - Sizes.size();
  for (size_t I = 0; I != Sizes.size(); ++I)
    if (Sizes[I] != 1 && Sizes[I] != OutSizes[I + Offset])
      return std::nullopt;
  std::vector<int64_t> Values;
  if (is_contained(OutSizes, 0))
    return Values;
  SmallVector<int64_t, 4> Index(OutSizes.size(), 0);
  do
    Values.push_back(T.getInts()[broadcastIndex(Index, OutSizes, Sizes)]);
  while (nextRowMajorIndex(Index, OutSizes));
  return Values;
}

/// Fn folded over the integer operands left to right, each broadcast to the
/// result: Fn(Fn(a, b), c) for the variadic ones. Nullopt where Fn is (an
/// overflow, a division by zero).
static FoldResult
foldIntElementwise(const Node &N, ArrayRef<const DenseTensor *> Operands,
                   function_ref<std::optional<int64_t>(int64_t, int64_t)> Fn) {
  auto Ints = getIntOperands(Operands);
  std::optional<TensorType> Type = getFoldableResultType(N);
  if (!Ints || !Type)
    return std::nullopt;
  SmallVector<int64_t, 4> OutSizes = Type->getStaticSizes();
  std::optional<std::vector<int64_t>> Values;
  for (const DenseTensor *T : *Ints) {
    std::optional<std::vector<int64_t>> Next = broadcastValues(*T, OutSizes);
    if (!Next)
      return std::nullopt;
    if (Values)
      for (size_t I = 0, E = Next->size(); I != E; ++I) {
        std::optional<int64_t> R = Fn((*Values)[I], (*Next)[I]);
        if (!R)
          return std::nullopt;
        (*Next)[I] = *R;
      }
    Values = std::move(Next);
  }
  return makeIntResult(*Type, std::move(*Values));
}

/// foldIntElementwise with the op's element function.
static FoldResult foldIntByElementFn(const Node &N,
                                     ArrayRef<const DenseTensor *> Operands) {
  ElementFn Fn = getOpFacts(N.getOp()).Element;
  return foldIntElementwise(N, Operands, [Fn](int64_t A, int64_t B) {
    return applyIntElementFn(Fn, A, B);
  });
}

FoldResult autopar::foldIntBinary(const Node &N,
                                  ArrayRef<const DenseTensor *> Operands) {
  return foldIntByElementFn(N, Operands);
}

FoldResult autopar::foldIntUnary(const Node &N,
                                 ArrayRef<const DenseTensor *> Operands) {
  auto Ints = getIntOperands(Operands);
  std::optional<TensorType> Type = getFoldableResultType(N);
  if (!Ints || !Type || N.getOp() != OpId::Neg)
    return std::nullopt;
  std::vector<int64_t> Values;
  for (int64_t V : (*Ints)[0]->getInts()) {
    if (V == INT64_MIN)
      return std::nullopt;
    Values.push_back(-V);
  }
  return makeIntResult(*Type, std::move(Values));
}

FoldResult autopar::foldReshape(const Node &N,
                                ArrayRef<const DenseTensor *> Operands) {
  std::optional<TensorType> Type = getFoldableResultType(N);
  if (!Operands[0] || Operands[0]->isFloat() || !Type)
    return std::nullopt;
  ArrayRef<int64_t> Data = Operands[0]->getInts();
  return makeIntResult(*Type, std::vector<int64_t>(Data.begin(), Data.end()));
}

FoldResult autopar::foldConcat(const Node &N,
                               ArrayRef<const DenseTensor *> Operands) {
  auto Ints = getIntOperands(Operands);
  std::optional<TensorType> Type = getFoldableResultType(N);
  if (!Ints || !Type)
    return std::nullopt;
  // Concatenation along Axis interleaves blocks: for each index of the outer
  // dimensions, copy each operand's inner block in turn.
  int64_t Axis = N.getAttr("axis")->getInt();
  unsigned Rank = Type->getRank();
  if (Axis < 0)
    Axis += Rank;
  SmallVector<int64_t, 4> OutSizes = Type->getStaticSizes();
  int64_t Outer = 1;
  for (int64_t I = 0; I < Axis; ++I)
    Outer *= OutSizes[I];
  std::vector<int64_t> Values;
  for (int64_t O = 0; O != Outer; ++O)
    for (const DenseTensor *T : *Ints) {
      int64_t Block = T->size() / std::max<int64_t>(Outer, 1);
      ArrayRef<int64_t> Src = T->getInts().slice(O * Block, Block);
      Values.insert(Values.end(), Src.begin(), Src.end());
    }
  return makeIntResult(*Type, std::move(Values));
}

FoldResult autopar::foldGather(const Node &N,
                               ArrayRef<const DenseTensor *> Operands) {
  auto Ints = getIntOperands(Operands);
  std::optional<TensorType> Type = getFoldableResultType(N);
  if (!Ints || !Type)
    return std::nullopt;
  const DenseTensor &Data = *(*Ints)[0], &Indices = *(*Ints)[1];
  SmallVector<int64_t, 4> DataSizes = Data.getType().getStaticSizes();
  int64_t Axis = N.getAttr("axis") ? N.getAttr("axis")->getInt() : 0;
  if (Axis < 0)
    Axis += DataSizes.size();
  int64_t Outer = 1, Inner = 1, AxisSize = DataSizes[Axis];
  for (int64_t I = 0; I < Axis; ++I)
    Outer *= DataSizes[I];
  for (size_t I = Axis + 1; I < DataSizes.size(); ++I)
    Inner *= DataSizes[I];
  std::vector<int64_t> Values;
  for (int64_t O = 0; O != Outer; ++O)
    for (int64_t Idx : Indices.getInts()) {
      if (Idx < -AxisSize || Idx >= AxisSize)
        return std::nullopt;
      if (Idx < 0)
        Idx += AxisSize;
      ArrayRef<int64_t> Src =
          Data.getInts().slice((O * AxisSize + Idx) * Inner, Inner);
      Values.insert(Values.end(), Src.begin(), Src.end());
    }
  return makeIntResult(*Type, std::move(Values));
}

FoldResult autopar::foldIntCompare(const Node &N,
                                   ArrayRef<const DenseTensor *> Operands) {
  if (N.getResult(0)->getType().getElementType() != ElementType::Bool)
    return std::nullopt;
  return foldIntByElementFn(N, Operands);
}

FoldResult autopar::foldIntMinMax(const Node &N,
                                  ArrayRef<const DenseTensor *> Operands) {
  return foldIntByElementFn(N, Operands);
}

FoldResult autopar::foldIntMod(const Node &N,
                               ArrayRef<const DenseTensor *> Operands) {
  const Attribute *FMod = N.getAttr("fmod");
  bool TruncatedRemainder = FMod && FMod->getInt() == 1;
  return foldIntElementwise(
      N, Operands, [&](int64_t X, int64_t Y) -> std::optional<int64_t> {
        std::optional<int64_t> R = applyIntElementFn(ElementFn::Mod, X, Y);
        // C's fmod: the dividend's sign (the truncated division's remainder).
        if (R && TruncatedRemainder)
          R = Y == -1 ? 0 : X % Y;
        return R;
      });
}

FoldResult autopar::foldWhere(const Node &N,
                              ArrayRef<const DenseTensor *> Operands) {
  auto Ints = getIntOperands(Operands);
  std::optional<TensorType> Type = getFoldableResultType(N);
  if (!Ints || (*Ints)[0]->getType().getElementType() != ElementType::Bool ||
      !Type)
    return std::nullopt;
  SmallVector<int64_t, 4> OutSizes = Type->getStaticSizes();
  auto Cond = broadcastValues(*(*Ints)[0], OutSizes);
  auto X = broadcastValues(*(*Ints)[1], OutSizes);
  auto Y = broadcastValues(*(*Ints)[2], OutSizes);
  if (!Cond || !X || !Y)
    return std::nullopt;
  std::vector<int64_t> Values;
  for (size_t I = 0, E = Cond->size(); I != E; ++I)
    Values.push_back((*Cond)[I] ? (*X)[I] : (*Y)[I]);
  return makeIntResult(*Type, std::move(Values));
}

/// V converted to the integer or bool type Ty as ONNX Cast does: bool is
/// V != 0; narrower integers keep the low bits, reinterpreted in two's
/// complement for signed types (200 as i8 is -56).
static int64_t castInt(int64_t V, ElementType Ty) {
  switch (Ty) {
  case ElementType::Bool:
    return V != 0;
  case ElementType::I32:
    return static_cast<int32_t>(static_cast<uint32_t>(V));
  case ElementType::I8:
    return static_cast<int8_t>(static_cast<uint8_t>(V));
  case ElementType::U8:
    return static_cast<uint8_t>(V);
  default:
    return V;
  }
}

FoldResult autopar::foldCast(const Node &N,
                             ArrayRef<const DenseTensor *> Operands) {
  auto Ints = getIntOperands(Operands);
  std::optional<TensorType> Type = getFoldableResultType(N);
  if (!Ints || !Type || (*Ints)[0]->getType().getShape() != Type->getShape())
    return std::nullopt;
  std::vector<int64_t> Values;
  for (int64_t V : (*Ints)[0]->getInts())
    Values.push_back(castInt(V, Type->getElementType()));
  return makeIntResult(*Type, std::move(Values));
}
