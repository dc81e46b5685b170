//===- KernelArgs.cpp - What every backend's kernels take -----------------===//

#include "runtime/KernelArgs.h"

#include "ir/Graph.h"

#include <cassert>

using namespace autopar;
using namespace llvm;

static std::string formatShape(ArrayRef<int64_t> S) {
  std::string Text = "[";
  for (size_t I = 0; I != S.size(); ++I)
    Text += (I ? ", " : "") + std::to_string(S[I]);
  return Text + "]";
}

Error KernelArgs::error(const Twine &Message) const {
  return createNodeError(N, Message);
}

const Attribute *KernelArgs::attr(StringRef Name) const {
  return N.getAttr(Name);
}

int64_t KernelArgs::intAttr(StringRef Name, int64_t Default) const {
  const Attribute *A = attr(Name);
  if (A && A->isa(Attribute::Kind::Int))
    return A->getInt();
  if (A && A->isa(Attribute::Kind::Bool))
    return A->getBool();
  return Default;
}

double KernelArgs::floatAttr(StringRef Name, double Default) const {
  const Attribute *A = attr(Name);
  if (A && A->isa(Attribute::Kind::Float))
    return A->getFloat();
  if (A && A->isa(Attribute::Kind::Int))
    return double(A->getInt());
  return Default;
}

StringRef KernelArgs::stringAttr(StringRef Name, StringRef Default) const {
  const Attribute *A = attr(Name);
  if (A && A->isa(Attribute::Kind::String))
    return A->getString();
  return Default;
}

Error KernelArgs::checkShape(unsigned I, ArrayRef<int64_t> S) const {
  if (Out[I].getShape() == S)
    return Error::success();
  return error("result " + Twine(I) + " has shape " + formatShape(S) +
               " but the program declares " + Out[I].getTypeString());
}

static Error checkElementType(const KernelArgs &A, const Tensor &T,
                              const Twine &What,
                              std::initializer_list<ElementType> Types) {
  for (ElementType Ty : Types)
    if (T.getElementType() == Ty)
      return Error::success();
  std::string Names;
  for (ElementType Ty : Types)
    Names += (Names.empty() ? "" : ", ") + getElementTypeName(Ty).str();
  return A.error(What + " is " + T.getTypeString() + "; the CPU kernel takes " +
                 Names);
}

Error KernelArgs::checkType(unsigned I,
                            std::initializer_list<ElementType> Types) const {
  return checkElementType(*this, In[I], "operand " + Twine(I), Types);
}

Error KernelArgs::checkResultType(
    unsigned I, std::initializer_list<ElementType> Types) const {
  return checkElementType(*this, Out[I], "result " + Twine(I), Types);
}

Expected<Shape> KernelArgs::readInts(unsigned I) const {
  const Tensor &T = In[I];
  if (T.getRank() > 1)
    return error("operand " + Twine(I) + " must have rank 0 or 1, got " +
                 T.getTypeString());
  Shape Values;
  if (T.getElementType() == ElementType::I64) {
    Values.assign(T.data<int64_t>(), T.data<int64_t>() + T.getNumElements());
    return Values;
  }
  if (T.getElementType() == ElementType::I32) {
    for (int64_t J = 0, E = T.getNumElements(); J != E; ++J)
      Values.push_back(T.data<int32_t>()[J]);
    return Values;
  }
  return error("operand " + Twine(I) + " must be i64 or i32, got " +
               T.getTypeString());
}

Expected<unsigned> KernelArgs::normalizeAxis(int64_t Axis,
                                             unsigned Rank) const {
  if (Axis < -int64_t(Rank) || Axis >= int64_t(Rank))
    return error("axis " + Twine(Axis) + " is out of range for rank " +
                 Twine(Rank));
  return unsigned(Axis < 0 ? Axis + Rank : Axis);
}

Expected<std::optional<Shape>>
KernelArgs::intsFromAttrOrOperand(StringRef Name, unsigned I) const {
  if (const Attribute *A = attr(Name))
    return std::optional<Shape>(toShape(A->getIntList()));
  if (!has(I))
    return std::optional<Shape>();
  Expected<Shape> Values = readInts(I);
  if (!Values)
    return Values.takeError();
  return std::optional<Shape>(std::move(*Values));
}

std::optional<Shape>
autopar::broadcastShapes(ArrayRef<ArrayRef<int64_t>> Shapes) {
  size_t Rank = 0;
  for (ArrayRef<int64_t> S : Shapes)
    Rank = std::max(Rank, S.size());
  Shape Result(Rank, 1);
  for (ArrayRef<int64_t> S : Shapes) {
    size_t Skip = Rank - S.size();
    for (size_t I = 0; I != S.size(); ++I) {
      int64_t &R = Result[Skip + I];
      if (S[I] == R || S[I] == 1)
        continue;
      if (R != 1)
        return std::nullopt;
      R = S[I];
    }
  }
  return Result;
}

Shape autopar::getStrides(ArrayRef<int64_t> S) {
  Shape Strides(S.size(), 1);
  for (size_t I = S.size(); I-- > 1;)
    Strides[I - 1] = Strides[I] * S[I];
  return Strides;
}

Shape autopar::getBroadcastStrides(ArrayRef<int64_t> In,
                                   ArrayRef<int64_t> Target) {
  assert(In.size() <= Target.size() && "operand has a higher rank");
  Shape Own = getStrides(In);
  Shape Strides(Target.size(), 0);
  size_t Skip = Target.size() - In.size();
  for (size_t I = 0; I != In.size(); ++I)
    Strides[Skip + I] = In[I] == 1 && Target[Skip + I] != 1 ? 0 : Own[I];
  return Strides;
}

StridedWalk::StridedWalk(ArrayRef<int64_t> S, ArrayRef<Shape> OperandStrides,
                         ArrayRef<int64_t> Bases)
    : Dims(S.begin(), S.end()),
      Strides(OperandStrides.begin(), OperandStrides.end()),
      Index(S.size(), 0) {
  Offsets.assign(Strides.size(), 0);
  for (size_t K = 0; K != Bases.size(); ++K)
    Offsets[K] = Bases[K];
}

int64_t StridedWalk::contiguousRun(unsigned Operand) const {
  if (Dims.empty() || Strides[Operand].back() != 1)
    return 1;
  return Dims.back() - Index.back();
}

void StridedWalk::advance(int64_t N) {
  if (N <= 0)
    return;
  // All but the last step stay within the innermost dimension.
  if (!Dims.empty() && N > 1) {
    Index.back() += N - 1;
    for (size_t K = 0; K != Offsets.size(); ++K)
      Offsets[K] += Strides[K].back() * (N - 1);
  }
  next();
}

void StridedWalk::next() {
  for (size_t D = Dims.size(); D-- > 0;) {
    if (++Index[D] < Dims[D]) {
      for (size_t K = 0; K != Offsets.size(); ++K)
        Offsets[K] += Strides[K][D];
      return;
    }
    Index[D] = 0;
    for (size_t K = 0; K != Offsets.size(); ++K)
      Offsets[K] -= Strides[K][D] * (Dims[D] - 1);
  }
}
