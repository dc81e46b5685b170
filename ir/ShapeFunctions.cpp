//===- ShapeFunctions.cpp - Verifiers and shape functions of ops ----------===//

#include "ir/ShapeFunctions.h"
#include "ir/Graph.h"
#include "ir/ShapeValues.h"

#include "llvm/ADT/STLExtras.h"
#include "llvm/Support/MathExtras.h"

#include <algorithm>

using namespace autopar;
using namespace llvm;

/// Reshape targets longer than this are rejected rather than allocated.
constexpr int64_t MaxReshapeRank = 256;

std::string autopar::dimsStr(ArrayRef<Dim> Dims) {
  std::string S;
  raw_string_ostream OS(S);
  OS << '[';
  interleaveComma(Dims, OS);
  OS << ']';
  return OS.str();
}

std::string autopar::typeStr(const ShapeContext &Ctx, unsigned I) {
  return Ctx.getOperandType(I).str();
}

/// Maps an ONNX axis in [-Rank, Rank) to [0, Rank).
Expected<unsigned> autopar::normalizeAxis(const ShapeContext &Ctx, int64_t Axis,
                                          unsigned Rank) {
  int64_t R = Rank;
  if (Axis < -R || Axis >= R)
    return Ctx.error("axis " + Twine(Axis) + " is out of range for rank " +
                     Twine(Rank));
  return static_cast<unsigned>(Axis < 0 ? Axis + R : Axis);
}

/// The sum of two dimensions when it is a monomial, else unknown.
Dim autopar::addDims(const Dim &A, const Dim &B) {
  if (A.isUnknown() || B.isUnknown())
    return Dim();
  if (A.getSymbols() != B.getSymbols())
    return Dim();
  int64_t Coefficient;
  if (AddOverflow(A.getCoefficient(), B.getCoefficient(), Coefficient))
    return Dim();
  Dim Sum = Dim::get(Coefficient);
  for (const std::string &S : A.getSymbols())
    Sum = Sum * Dim::getSymbol(S);
  return Sum;
}

/// The more precise of two compatible dimensions.
Dim autopar::meetDims(const Dim &A, const Dim &B) {
  return A.isUnknown() ? B : A;
}

Error autopar::checkSameElementType(const ShapeContext &Ctx) {
  for (unsigned I = 1, E = Ctx.getNumOperands(); I != E; ++I)
    if (Ctx.hasOperand(I) && Ctx.getOperandType(I).getElementType() !=
                                 Ctx.getOperandType(0).getElementType())
      return Ctx.error("operand element types differ: " + typeStr(Ctx, 0) +
                       " and " + typeStr(Ctx, I));
  return Error::success();
}

/// The axes of a reduction or Unsqueeze: the `axes` attribute, else the
/// constant second operand. Returns nullopt when they are not known.
std::optional<std::vector<int64_t>> autopar::getAxes(const ShapeContext &Ctx) {
  if (const Attribute *A = Ctx.getAttr("axes"))
    return std::vector<int64_t>(A->getIntList().begin(), A->getIntList().end());
  if (!Ctx.hasOperand(1))
    return std::vector<int64_t>();
  if (const DenseTensor *T = Ctx.getConstantOperand(1))
    if (!T->isFloat())
      return std::vector<int64_t>(T->getInts().begin(), T->getInts().end());
  return std::nullopt;
}

std::optional<SmallVector<Dim, 4>> autopar::broadcastShapes(ArrayRef<Dim> A,
                                                            ArrayRef<Dim> B) {
  size_t Rank = std::max(A.size(), B.size());
  SmallVector<Dim, 4> Result(Rank);
  for (size_t I = 0; I != Rank; ++I) {
    // Align from the right; a missing dimension acts as 1.
    Dim DA = I + A.size() >= Rank ? A[I + A.size() - Rank] : Dim::get(1);
    Dim DB = I + B.size() >= Rank ? B[I + B.size() - Rank] : Dim::get(1);
    if (DA == DB)
      Result[I] = DA;
    else if (DA.isStatic() && DA.getSize() == 1)
      Result[I] = DB;
    else if (DB.isStatic() && DB.getSize() == 1)
      Result[I] = DA;
    else if (DA.isUnknown() || DB.isUnknown())
      // The known side wins unless it is 1 (handled above).
      Result[I] = DA.isUnknown() ? DB : DA;
    else
      return std::nullopt;
  }
  return Result;
}

std::optional<SmallVector<Dim, 4>>
autopar::broadcastShapes(ArrayRef<Dim> A, ArrayRef<Dim> B,
                         const ShapeContext &Ctx) {
  if (std::optional<SmallVector<Dim, 4>> Plain = broadcastShapes(A, B))
    return Plain;
  const Graph *G = Ctx.getNode().getGraph();
  if (!G)
    return std::nullopt;
  DimEqualities &Eq = G->getDimEqualities();
  size_t Rank = std::max(A.size(), B.size());
  SmallVector<Dim, 4> Result(Rank);
  for (size_t I = 0; I != Rank; ++I) {
    Dim DA =
        I + A.size() >= Rank ? Eq.resolve(A[I + A.size() - Rank]) : Dim::get(1);
    Dim DB =
        I + B.size() >= Rank ? Eq.resolve(B[I + B.size() - Rank]) : Dim::get(1);
    std::optional<SmallVector<Dim, 4>> One = broadcastShapes({DA}, {DB});
    if (One) {
      Result[I] = (*One)[0];
      continue;
    }
    std::optional<Dim> Same;
    if (Eq.isRecording())
      Same = Eq.assume(DA, DB, Ctx.getNode().getName());
    if (!Same)
      return std::nullopt;
    Result[I] = *Same;
  }
  return Result;
}

InferResult autopar::inferBroadcast(const ShapeContext &Ctx) {
  if (Error E = checkSameElementType(Ctx))
    return E;
  // Binary ops and the variadic Sum: every operand broadcasts together.
  SmallVector<Dim, 4> Shape(Ctx.getOperandType(0).getShape().begin(),
                            Ctx.getOperandType(0).getShape().end());
  for (unsigned I = 1, E = Ctx.getNumOperands(); I != E; ++I) {
    auto Next = broadcastShapes(Shape, Ctx.getOperandType(I).getShape(), Ctx);
    if (!Next)
      return Ctx.error("operand shapes do not broadcast: " + typeStr(Ctx, 0) +
                       " and " + typeStr(Ctx, I));
    Shape = *Next;
  }
  return SmallVector<TensorType, 1>{
      TensorType(Ctx.getOperandType(0).getElementType(), Shape)};
}

InferResult autopar::inferSameAsOperand(const ShapeContext &Ctx) {
  return SmallVector<TensorType, 1>{Ctx.getOperandType(0)};
}

InferResult autopar::inferMatMul(const ShapeContext &Ctx) {
  if (Error E = checkSameElementType(Ctx))
    return E;
  Expected<SmallVector<Dim, 4>> Result = getMatMulResultShape(Ctx);
  if (!Result)
    return Result.takeError();
  return SmallVector<TensorType, 1>{
      TensorType(Ctx.getOperandType(0).getElementType(), *Result)};
}

Expected<SmallVector<Dim, 4>>
autopar::getMatMulResultShape(const ShapeContext &Ctx) {
  const TensorType &TA = Ctx.getOperandType(0), &TB = Ctx.getOperandType(1);
  if (TA.getRank() == 0 || TB.getRank() == 0)
    return Ctx.error("operands must have rank 1 or more, got " +
                     typeStr(Ctx, 0) + " and " + typeStr(Ctx, 1));
  // numpy.matmul: a vector operand is promoted to a matrix and the added
  // dimension is dropped from the result.
  SmallVector<Dim, 4> A(TA.getShape().begin(), TA.getShape().end());
  SmallVector<Dim, 4> B(TB.getShape().begin(), TB.getShape().end());
  bool VectorA = A.size() == 1, VectorB = B.size() == 1;
  if (VectorA)
    A.insert(A.begin(), Dim::get(1));
  if (VectorB)
    B.push_back(Dim::get(1));
  const Dim &KA = A[A.size() - 1], &KB = B[B.size() - 2];
  if (!KA.isUnknown() && !KB.isUnknown() && KA != KB)
    return Ctx.error("contracting dimensions differ: " + typeStr(Ctx, 0) +
                     " and " + typeStr(Ctx, 1));
  auto Batch = broadcastShapes(ArrayRef<Dim>(A).drop_back(2),
                               ArrayRef<Dim>(B).drop_back(2), Ctx);
  if (!Batch)
    return Ctx.error("batch dimensions do not broadcast: " + typeStr(Ctx, 0) +
                     " and " + typeStr(Ctx, 1));
  SmallVector<Dim, 4> Result(Batch->begin(), Batch->end());
  if (!VectorA)
    Result.push_back(A[A.size() - 2]);
  if (!VectorB)
    Result.push_back(B[B.size() - 1]);
  return Result;
}

InferResult autopar::inferLinear(const ShapeContext &Ctx) {
  if (Error E = checkSameElementType(Ctx))
    return E;
  const TensorType &X = Ctx.getOperandType(0), &W = Ctx.getOperandType(1);
  if (X.getRank() == 0 || W.getRank() != 2)
    return Ctx.error("X must have rank 1 or more and W rank 2, got " +
                     typeStr(Ctx, 0) + " and " + typeStr(Ctx, 1));
  const Dim &K = X.getDim(X.getRank() - 1);
  if (!K.isUnknown() && !W.getDim(0).isUnknown() && K != W.getDim(0))
    return Ctx.error("contracting dimensions differ: " + typeStr(Ctx, 0) +
                     " and " + typeStr(Ctx, 1));
  Dim N = W.getDim(1);
  if (Ctx.hasOperand(2)) {
    const TensorType &B = Ctx.getOperandType(2);
    if (B.getRank() != 1 ||
        (!B.getDim(0).isUnknown() && !N.isUnknown() && B.getDim(0) != N))
      return Ctx.error("B must be [N] for W " + typeStr(Ctx, 1) + ", got " +
                       typeStr(Ctx, 2));
    N = meetDims(N, B.getDim(0));
  }
  SmallVector<Dim, 4> Shape(X.getShape().begin(), X.getShape().end() - 1);
  Shape.push_back(N);
  return SmallVector<TensorType, 1>{TensorType(X.getElementType(), Shape)};
}

Error autopar::verifyReduce(const ShapeContext &Ctx) {
  if (Ctx.getAttr("axes") && Ctx.hasOperand(1))
    return Ctx.error("axes are given both as an attribute and an operand");
  for (StringRef Flag : {"keepdims", "noop_with_empty_axes"}) {
    int64_t V = Ctx.getIntAttr(Flag, 0);
    if (V != 0 && V != 1)
      return Ctx.error("'" + Flag + "' must be 0 or 1, got " + Twine(V));
  }
  return Error::success();
}

InferResult autopar::inferReduce(const ShapeContext &Ctx) {
  const TensorType &In = Ctx.getOperandType(0);
  bool KeepDims = Ctx.getIntAttr("keepdims", 1);
  std::optional<std::vector<int64_t>> Axes = getAxes(Ctx);
  if (!Axes) {
    if (!KeepDims)
      return Ctx.error("axes must be constant when keepdims is 0");
    // Any dimension may become 1.
    return SmallVector<TensorType, 1>{TensorType(
        In.getElementType(), SmallVector<Dim, 4>(In.getRank(), Dim()))};
  }
  SmallVector<bool, 4> Reduced(In.getRank(), false);
  if (Axes->empty()) {
    if (Ctx.getIntAttr("noop_with_empty_axes", 0))
      return SmallVector<TensorType, 1>{In};
    Reduced.assign(In.getRank(), true);
  }
  for (int64_t Axis : *Axes) {
    Expected<unsigned> A = normalizeAxis(Ctx, Axis, In.getRank());
    if (!A)
      return A.takeError();
    if (Reduced[*A])
      return Ctx.error("axis " + Twine(Axis) + " is repeated");
    Reduced[*A] = true;
  }
  SmallVector<Dim, 4> Shape;
  for (unsigned I = 0, E = In.getRank(); I != E; ++I) {
    if (!Reduced[I])
      Shape.push_back(In.getDim(I));
    else if (KeepDims)
      Shape.push_back(Dim::get(1));
  }
  return SmallVector<TensorType, 1>{TensorType(In.getElementType(), Shape)};
}

InferResult autopar::inferConstant(const ShapeContext &Ctx) {
  return SmallVector<TensorType, 1>{
      Ctx.getAttr("value")->getTensor().getType()};
}

std::pair<unsigned, unsigned> autopar::getShapeRange(const ShapeContext &Ctx,
                                                     unsigned Rank) {
  int64_t R = Rank;
  auto Clamp = [R](int64_t V) {
    if (V < 0)
      V += R;
    return std::clamp<int64_t>(V, 0, R);
  };
  int64_t Start = Clamp(Ctx.getIntAttr("start", 0));
  int64_t End = Clamp(Ctx.getIntAttr("end", R));
  return {static_cast<unsigned>(Start),
          static_cast<unsigned>(std::max(Start, End))};
}

InferResult autopar::inferShape(const ShapeContext &Ctx) {
  auto [Start, End] = getShapeRange(Ctx, Ctx.getOperandType(0).getRank());
  return SmallVector<TensorType, 1>{
      TensorType::get(ElementType::I64, {int64_t(End - Start)})};
}

bool autopar::isIntegerElementType(ElementType Ty) {
  return Ty == ElementType::I64 || Ty == ElementType::I32;
}

InferResult autopar::inferReshape(const ShapeContext &Ctx) {
  const TensorType &In = Ctx.getOperandType(0);
  const TensorType &ShapeTy = Ctx.getOperandType(1);
  if (ShapeTy.getElementType() != ElementType::I64 || ShapeTy.getRank() != 1 ||
      !ShapeTy.getDim(0).isStatic())
    return Ctx.error("shape operand must be i64[N] with a static N, got " +
                     typeStr(Ctx, 1));
  if (ShapeTy.getDim(0).getSize() > MaxReshapeRank)
    return Ctx.error("shape operand has " + Twine(ShapeTy.getDim(0).getSize()) +
                     " entries; at most " + Twine(MaxReshapeRank) +
                     " are supported");
  unsigned Rank = ShapeTy.getDim(0).getSize();
  std::optional<ShapeValue> Target = Ctx.getShapeValue(1);
  if (!Target)
    // The target is not known: Rank dimensions, all unknown.
    return SmallVector<TensorType, 1>{
        TensorType(In.getElementType(), SmallVector<Dim, 4>(Rank, Dim()))};
  bool AllowZero = Ctx.getIntAttr("allowzero", 0);
  SmallVector<Dim, 4> Shape;
  std::optional<unsigned> Inferred;
  Dim Known = Dim::get(1);
  for (unsigned I = 0; I != Rank; ++I) {
    const ShapeEntry &E = (*Target)[I];
    if (E.Int && *E.Int == -1) {
      if (Inferred)
        return Ctx.error("shape has more than one -1");
      Inferred = I;
      Shape.push_back(Dim());
      continue;
    }
    if (E.Int && *E.Int < -1)
      return Ctx.error("shape entry " + Twine(*E.Int) + " is negative");
    if (E.Int && *E.Int == 0 && !AllowZero) {
      if (I >= In.getRank())
        return Ctx.error("shape entry 0 at " + Twine(I) +
                         " copies a dimension the input does not have");
      Shape.push_back(In.getDim(I));
    } else {
      Shape.push_back(E.toDim());
    }
    Known = Known * Shape.back();
  }
  Dim Total = In.getNumElements();
  // Symbolic sizes are errors only when provably different: static and
  // unequal, or the same symbols with different coefficients.
  if (Inferred) {
    if (std::optional<Dim> Q = Total.divide(Known))
      Shape[*Inferred] = *Q;
    else if (!Total.isUnknown() && !Known.isUnknown() &&
             Total.getSymbols() == Known.getSymbols())
      // The quotient would be a constant, and it is not an integer.
      return Ctx.error("cannot reshape " + typeStr(Ctx, 0) +
                       ": the known dimensions do not divide its size");
  } else if (!Total.isUnknown() && !Known.isUnknown() &&
             Total.getSymbols() == Known.getSymbols() && Total != Known) {
    std::string S;
    raw_string_ostream OS(S);
    OS << Known;
    return Ctx.error("cannot reshape " + typeStr(Ctx, 0) + " to " +
                     Twine(Rank) + " dimensions of " + OS.str() + " elements");
  }
  return SmallVector<TensorType, 1>{TensorType(In.getElementType(), Shape)};
}

Error autopar::verifyTranspose(const ShapeContext &Ctx) {
  const Attribute *Perm = Ctx.getAttr("perm");
  if (!Perm)
    return Error::success();
  unsigned Rank = Ctx.getOperandType(0).getRank();
  ArrayRef<int64_t> P = Perm->getIntList();
  SmallVector<bool, 4> Seen(Rank, false);
  bool Valid = P.size() == Rank;
  for (int64_t I : P) {
    if (!Valid || I < 0 || I >= int64_t(Rank) || Seen[I]) {
      Valid = false;
      break;
    }
    Seen[I] = true;
  }
  if (!Valid)
    return Ctx.error("'perm' is not a permutation of the " + Twine(Rank) +
                     " dimensions of " + typeStr(Ctx, 0));
  return Error::success();
}

InferResult autopar::inferTranspose(const ShapeContext &Ctx) {
  const TensorType &In = Ctx.getOperandType(0);
  SmallVector<Dim, 4> Shape;
  if (const Attribute *Perm = Ctx.getAttr("perm")) {
    for (int64_t I : Perm->getIntList())
      Shape.push_back(In.getDim(I));
  } else {
    Shape.assign(In.getShape().rbegin(), In.getShape().rend());
  }
  return SmallVector<TensorType, 1>{TensorType(In.getElementType(), Shape)};
}

InferResult autopar::inferConcat(const ShapeContext &Ctx) {
  if (Error E = checkSameElementType(Ctx))
    return E;
  const TensorType &First = Ctx.getOperandType(0);
  Expected<unsigned> Axis =
      normalizeAxis(Ctx, Ctx.getAttr("axis")->getInt(), First.getRank());
  if (!Axis)
    return Axis.takeError();
  SmallVector<Dim, 4> Shape(First.getShape().begin(), First.getShape().end());
  for (unsigned I = 1, E = Ctx.getNumOperands(); I != E; ++I) {
    const TensorType &T = Ctx.getOperandType(I);
    if (T.getRank() != First.getRank())
      return Ctx.error("operand ranks differ: " + typeStr(Ctx, 0) + " and " +
                       typeStr(Ctx, I));
    for (unsigned D = 0, R = T.getRank(); D != R; ++D) {
      if (D == *Axis) {
        Shape[D] = addDims(Shape[D], T.getDim(D));
        continue;
      }
      if (!Shape[D].isUnknown() && !T.getDim(D).isUnknown() &&
          Shape[D] != T.getDim(D))
        return Ctx.error("operand shapes differ outside the axis: " +
                         typeStr(Ctx, 0) + " and " + typeStr(Ctx, I));
      Shape[D] = meetDims(Shape[D], T.getDim(D));
    }
  }
  return SmallVector<TensorType, 1>{TensorType(First.getElementType(), Shape)};
}

InferResult autopar::inferGather(const ShapeContext &Ctx) {
  const TensorType &Data = Ctx.getOperandType(0);
  const TensorType &Indices = Ctx.getOperandType(1);
  if (!isIntegerElementType(Indices.getElementType()))
    return Ctx.error("indices must be i32 or i64, got " + typeStr(Ctx, 1));
  if (Data.getRank() == 0)
    return Ctx.error("data must have rank 1 or more");
  Expected<unsigned> Axis =
      normalizeAxis(Ctx, Ctx.getIntAttr("axis", 0), Data.getRank());
  if (!Axis)
    return Axis.takeError();
  SmallVector<Dim, 4> Shape(Data.getShape().begin(),
                            Data.getShape().begin() + *Axis);
  Shape.append(Indices.getShape().begin(), Indices.getShape().end());
  Shape.append(Data.getShape().begin() + *Axis + 1, Data.getShape().end());
  return SmallVector<TensorType, 1>{TensorType(Data.getElementType(), Shape)};
}

InferResult autopar::inferUnsqueeze(const ShapeContext &Ctx) {
  const TensorType &In = Ctx.getOperandType(0);
  if (Ctx.getAttr("axes") && Ctx.hasOperand(1))
    return Ctx.error("axes are given both as an attribute and an operand");
  std::optional<std::vector<int64_t>> Axes = getAxes(Ctx);
  if (!Axes)
    return Ctx.error("axes must be constant");
  if (Axes->empty())
    return Ctx.error("axes must not be empty");
  unsigned OutRank = In.getRank() + Axes->size();
  SmallVector<bool, 4> IsNew(OutRank, false);
  for (int64_t Axis : *Axes) {
    Expected<unsigned> A = normalizeAxis(Ctx, Axis, OutRank);
    if (!A)
      return A.takeError();
    if (IsNew[*A])
      return Ctx.error("axis " + Twine(Axis) + " is repeated");
    IsNew[*A] = true;
  }
  SmallVector<Dim, 4> Shape;
  unsigned Next = 0;
  for (unsigned I = 0; I != OutRank; ++I)
    Shape.push_back(IsNew[I] ? Dim::get(1) : In.getDim(Next++));
  return SmallVector<TensorType, 1>{TensorType(In.getElementType(), Shape)};
}

InferResult autopar::inferDeclared(const ShapeContext &Ctx) {
  SmallVector<TensorType, 1> Types;
  for (unsigned I = 0, E = Ctx.getNode().getNumResults(); I != E; ++I)
    Types.push_back(Ctx.getResultType(I));
  return Types;
}
