//===- ShapeFunctionsMath.cpp - Elementwise, contraction, norm shapes -----===//
//
// Verifiers and shape functions of the elementwise ops (comparisons, logic,
// Where, float functions, Cast, Dropout, Softmax, CumSum, Trilu), the
// contractions Gemm and Einsum, and the normalizations. Each follows the
// type constraints and shape inference of the ONNX operator of the same name
// at the newest opset.
//
//===----------------------------------------------------------------------===//

#include "ir/Graph.h"
#include "ir/ShapeChecks.h"
#include "ir/ShapeFunctions.h"

#include "llvm/ADT/STLExtras.h"
#include "llvm/ADT/StringExtras.h"

#include <array>
#include <string>

using namespace autopar;
using namespace llvm;

//===----------------------------------------------------------------------===//
// Helpers
//===----------------------------------------------------------------------===//

InferResult autopar::oneResult(TensorType Type) {
  return SmallVector<TensorType, 1>{std::move(Type)};
}

/// The name Ops.def gives operand I, for messages.
std::string autopar::operandName(const ShapeContext &Ctx, unsigned I) {
  const OperandSpec *Spec = Ctx.getNode().getOpInfo().getOperand(I);
  return Spec ? Spec->Name : "operand #" + std::to_string(I);
}

/// An error unless the int attribute Name, when present, is 0 or 1.
Error autopar::checkFlag(const ShapeContext &Ctx, StringRef Name) {
  int64_t V = Ctx.getIntAttr(Name, 0);
  if (V != 0 && V != 1)
    return Ctx.error("'" + Name + "' must be 0 or 1, got " + Twine(V));
  return Error::success();
}

/// An error unless operand I has element type Ty.
Error autopar::checkElementType(const ShapeContext &Ctx, unsigned I,
                                ElementType Ty) {
  if (Ctx.getOperandType(I).getElementType() == Ty)
    return Error::success();
  return Ctx.error("'" + operandName(Ctx, I) + "' must be " +
                   getElementTypeName(Ty) + ", got " + typeStr(Ctx, I));
}

/// An error unless operand I has a floating-point element type.
Error autopar::checkFloat(const ShapeContext &Ctx, unsigned I) {
  if (isFloatElementType(Ctx.getOperandType(I).getElementType()))
    return Error::success();
  return Ctx.error("'" + operandName(Ctx, I) +
                   "' must be floating-point, got " + typeStr(Ctx, I));
}

/// An error when operand I is bool (ONNX's numeric type constraints).
Error autopar::checkNumeric(const ShapeContext &Ctx, unsigned I) {
  if (Ctx.getOperandType(I).getElementType() != ElementType::Bool)
    return Error::success();
  return Ctx.error("'" + operandName(Ctx, I) + "' must be numeric, got " +
                   typeStr(Ctx, I));
}

/// An error unless operands I and J have the same element type.
Error autopar::checkSameType(const ShapeContext &Ctx, unsigned I, unsigned J) {
  if (Ctx.getOperandType(I).getElementType() ==
      Ctx.getOperandType(J).getElementType())
    return Error::success();
  return Ctx.error("'" + operandName(Ctx, I) + "' and '" + operandName(Ctx, J) +
                   "' element types differ: " + typeStr(Ctx, I) + " and " +
                   typeStr(Ctx, J));
}

/// An error unless operand I is a scalar.
static Error checkScalar(const ShapeContext &Ctx, unsigned I) {
  if (Ctx.getOperandType(I).getRank() == 0)
    return Error::success();
  return Ctx.error("'" + operandName(Ctx, I) + "' must be a scalar, got " +
                   typeStr(Ctx, I));
}

/// An error unless operand I has one of the element types Allowed and is a
/// scalar or, as runtimes also accept, a tensor of one element.
static Error checkIntegerScalar(const ShapeContext &Ctx, unsigned I,
                                ArrayRef<ElementType> Allowed) {
  const TensorType &T = Ctx.getOperandType(I);
  bool OneElement = T.getRank() == 0 ||
                    (T.getRank() == 1 &&
                     (T.getDim(0).isUnknown() || T.getDim(0) == Dim::get(1)));
  if (is_contained(Allowed, T.getElementType()) && OneElement)
    return Error::success();
  std::string Types;
  for (ElementType Ty : Allowed)
    Types += (Types.empty() ? "" : " or ") + getElementTypeName(Ty).str();
  return Ctx.error("'" + operandName(Ctx, I) + "' must be a scalar of type " +
                   Types + ", got " + typeStr(Ctx, I));
}

/// The value of operand I when it is a constant integer scalar or 1-element
/// tensor.
static std::optional<int64_t> getConstantInt(const ShapeContext &Ctx,
                                             unsigned I) {
  const DenseTensor *T = Ctx.getConstantOperand(I);
  if (!T || T->isFloat() || T->size() != 1)
    return std::nullopt;
  return T->getInts()[0];
}

/// The numpy broadcast of all operands' shapes; an error that names the
/// operands up to the first that does not broadcast.
static Expected<SmallVector<Dim, 4>>
broadcastOperands(const ShapeContext &Ctx) {
  SmallVector<Dim, 4> Shape;
  for (unsigned I = 0, E = Ctx.getNumOperands(); I != E; ++I) {
    std::optional<SmallVector<Dim, 4>> Next =
        broadcastShapes(Shape, Ctx.getOperandType(I).getShape(), Ctx);
    if (!Next) {
      std::string Others;
      for (unsigned J = 0; J != I; ++J)
        Others += (J ? " and " : "") + typeStr(Ctx, J);
      return Ctx.error("operand shapes do not broadcast: " + Others + " and " +
                       typeStr(Ctx, I));
    }
    Shape = std::move(*Next);
  }
  return Shape;
}

/// One result of element type Ty and the broadcast shape of all operands.
InferResult autopar::broadcastResult(const ShapeContext &Ctx, ElementType Ty) {
  Expected<SmallVector<Dim, 4>> Shape = broadcastOperands(Ctx);
  if (!Shape)
    return Shape.takeError();
  return oneResult(TensorType(Ty, *Shape));
}

/// ONNX unidirectional broadcasting of Shape onto Target: Shape has at most
/// Target's rank and each of its dimensions, aligned right, is 1 or equal to
/// Target's. Returns Target with the unknown dimensions that Shape
/// determines filled in, or nullopt when Shape does not broadcast.
std::optional<SmallVector<Dim, 4>>
autopar::broadcastOnto(ArrayRef<Dim> Shape, ArrayRef<Dim> Target) {
  if (Shape.size() > Target.size())
    return std::nullopt;
  SmallVector<Dim, 4> Result(Target.begin(), Target.end());
  size_t Offset = Target.size() - Shape.size();
  for (size_t I = 0; I != Shape.size(); ++I) {
    const Dim &S = Shape[I];
    Dim &T = Result[I + Offset];
    if (S.isUnknown() || S == Dim::get(1) || S == T)
      continue;
    if (!T.isUnknown())
      return std::nullopt;
    T = S;
  }
  return Result;
}

/// True when two dimensions may be equal: either is unknown, or they are.
static bool dimsAgree(const Dim &A, const Dim &B) {
  return A.isUnknown() || B.isUnknown() || A == B;
}

//===----------------------------------------------------------------------===//
// Elementwise ops
//===----------------------------------------------------------------------===//

// ONNX Pow: the exponent may have another numeric type; the result has the
// base's type.
InferResult autopar::inferPow(const ShapeContext &Ctx) {
  for (unsigned I : {0u, 1u})
    if (Error E = checkNumeric(Ctx, I))
      return E;
  return broadcastResult(Ctx, Ctx.getOperandType(0).getElementType());
}

// ONNX Equal takes any type; Less and Greater take numeric types only.
InferResult autopar::inferCompare(const ShapeContext &Ctx) {
  if (Error E = checkSameElementType(Ctx))
    return E;
  if (Ctx.getNode().getOp() != OpId::Equal)
    if (Error E = checkNumeric(Ctx, 0))
      return E;
  return broadcastResult(Ctx, ElementType::Bool);
}

InferResult autopar::inferLogical(const ShapeContext &Ctx) {
  for (unsigned I : {0u, 1u})
    if (Error E = checkElementType(Ctx, I, ElementType::Bool))
      return E;
  return broadcastResult(Ctx, ElementType::Bool);
}

InferResult autopar::inferWhere(const ShapeContext &Ctx) {
  if (Error E = checkElementType(Ctx, 0, ElementType::Bool))
    return E;
  if (Error E = checkSameType(Ctx, 1, 2))
    return E;
  return broadcastResult(Ctx, Ctx.getOperandType(1).getElementType());
}

InferResult autopar::inferFloatUnary(const ShapeContext &Ctx) {
  if (Error E = checkFloat(Ctx, 0))
    return E;
  return oneResult(Ctx.getOperandType(0));
}

// ONNX SwiGLU: float A and B of one type; the shapes must agree dimension by
// dimension (no broadcasting).
InferResult autopar::inferSwiGLU(const ShapeContext &Ctx) {
  if (Error E = checkFloat(Ctx, 0))
    return E;
  if (Error E = checkSameType(Ctx, 0, 1))
    return E;
  ArrayRef<Dim> A = Ctx.getOperandType(0).getShape(),
                B = Ctx.getOperandType(1).getShape();
  if (A.size() != B.size() || !all_of(zip(A, B), [](auto P) {
        return dimsAgree(std::get<0>(P), std::get<1>(P));
      }))
    return Ctx.error("'A' and 'B' must have the same shape, got " +
                     typeStr(Ctx, 0) + " and " + typeStr(Ctx, 1));
  SmallVector<Dim, 4> Shape;
  for (auto [DA, DB] : zip(A, B))
    Shape.push_back(meetDims(DA, DB));
  return oneResult(TensorType(Ctx.getOperandType(0).getElementType(), Shape));
}

InferResult autopar::inferLogicalNot(const ShapeContext &Ctx) {
  if (Error E = checkElementType(Ctx, 0, ElementType::Bool))
    return E;
  return oneResult(Ctx.getOperandType(0));
}

Error autopar::verifyGelu(const ShapeContext &Ctx) {
  if (const Attribute *A = Ctx.getAttr("approximate")) {
    StringRef Mode = A->getString();
    if (Mode != "none" && Mode != "tanh")
      return Ctx.error("'approximate' must be \"none\" or \"tanh\", got \"" +
                       Mode + "\"");
  }
  return Error::success();
}

// Cast's `to` names an element type in autopar's spelling (the importer maps
// ONNX's TensorProto codes). `saturate` only matters for float8 targets.
Error autopar::verifyCast(const ShapeContext &Ctx) {
  StringRef To = Ctx.getAttr("to")->getString();
  if (!parseElementTypeName(To))
    return Ctx.error("'to' is not an element type: \"" + To + "\"");
  return checkFlag(Ctx, "saturate");
}

InferResult autopar::inferCast(const ShapeContext &Ctx) {
  std::optional<ElementType> To =
      parseElementTypeName(Ctx.getAttr("to")->getString());
  if (!To)
    return Ctx.error("'to' is not an element type: \"" +
                     Ctx.getAttr("to")->getString() + "\"");
  return oneResult(TensorType(*To, Ctx.getOperandType(0).getShape()));
}

// ONNX Dropout: ratio is a float scalar, training_mode a bool scalar; the
// mask has data's shape.
InferResult autopar::inferDropout(const ShapeContext &Ctx) {
  if (Error E = checkFloat(Ctx, 0))
    return E;
  if (Ctx.hasOperand(1)) {
    if (Error E = checkFloat(Ctx, 1))
      return E;
    if (Error E = checkScalar(Ctx, 1))
      return E;
  }
  if (Ctx.hasOperand(2)) {
    if (Error E = checkElementType(Ctx, 2, ElementType::Bool))
      return E;
    if (Error E = checkScalar(Ctx, 2))
      return E;
  }
  const TensorType &Data = Ctx.getOperandType(0);
  SmallVector<TensorType, 1> Types{Data};
  if (Ctx.getNode().getNumResults() > 1)
    Types.push_back(TensorType(ElementType::Bool, Data.getShape()));
  return Types;
}

// Softmax and LogSoftmax (opset 13): float input, `axis` defaults to -1.
InferResult autopar::inferAxisPreserving(const ShapeContext &Ctx) {
  if (Error E = checkFloat(Ctx, 0))
    return E;
  const TensorType &In = Ctx.getOperandType(0);
  if (Expected<unsigned> Axis =
          normalizeAxis(Ctx, Ctx.getIntAttr("axis", -1), In.getRank());
      !Axis)
    return Axis.takeError();
  return oneResult(In);
}

// ONNX CumSum: numeric x; axis is an i32 or i64 0-D tensor (runtimes also
// accept one element) in [-rank, rank).
InferResult autopar::inferCumSum(const ShapeContext &Ctx) {
  for (StringRef Flag : {"exclusive", "reverse"})
    if (Error E = checkFlag(Ctx, Flag))
      return E;
  if (Error E = checkNumeric(Ctx, 0))
    return E;
  if (Error E =
          checkIntegerScalar(Ctx, 1, {ElementType::I32, ElementType::I64}))
    return E;
  const TensorType &X = Ctx.getOperandType(0);
  if (std::optional<int64_t> Axis = getConstantInt(Ctx, 1))
    if (Expected<unsigned> A = normalizeAxis(Ctx, *Axis, X.getRank()); !A)
      return A.takeError();
  return oneResult(X);
}

// ONNX Trilu: input of rank 2 or more; k is an i64 0-D tensor.
InferResult autopar::inferTrilu(const ShapeContext &Ctx) {
  if (Error E = checkFlag(Ctx, "upper"))
    return E;
  const TensorType &In = Ctx.getOperandType(0);
  if (In.getRank() < 2)
    return Ctx.error("'input' must have rank 2 or more, got " +
                     typeStr(Ctx, 0));
  if (Ctx.hasOperand(1))
    if (Error E = checkIntegerScalar(Ctx, 1, {ElementType::I64}))
      return E;
  return oneResult(In);
}

//===----------------------------------------------------------------------===//
// Contractions
//===----------------------------------------------------------------------===//

// ONNX Gemm: Y[M, N] = alpha * A'[M, K] * B'[K, N] + beta * C, where A' and
// B' are A and B transposed when transA and transB are set, and C is
// unidirectionally broadcast to [M, N].
InferResult autopar::inferGemm(const ShapeContext &Ctx) {
  for (StringRef Flag : {"transA", "transB"})
    if (Error E = checkFlag(Ctx, Flag))
      return E;
  if (Error E = checkSameElementType(Ctx))
    return E;
  const TensorType &A = Ctx.getOperandType(0), &B = Ctx.getOperandType(1);
  for (unsigned I : {0u, 1u})
    if (Ctx.getOperandType(I).getRank() != 2)
      return Ctx.error("'" + operandName(Ctx, I) + "' must have rank 2, got " +
                       typeStr(Ctx, I));
  bool TransA = Ctx.getIntAttr("transA", 0),
       TransB = Ctx.getIntAttr("transB", 0);
  const Dim &M = A.getDim(TransA ? 1 : 0), &KA = A.getDim(TransA ? 0 : 1);
  const Dim &KB = B.getDim(TransB ? 1 : 0), &N = B.getDim(TransB ? 0 : 1);
  if (!dimsAgree(KA, KB))
    return Ctx.error("contracting dimensions differ: " + typeStr(Ctx, 0) +
                     (TransA ? " (transposed)" : "") + " and " +
                     typeStr(Ctx, 1) + (TransB ? " (transposed)" : ""));
  SmallVector<Dim, 4> Shape{M, N};
  if (Ctx.hasOperand(2)) {
    std::optional<SmallVector<Dim, 4>> Refined =
        broadcastOnto(Ctx.getOperandType(2).getShape(), Shape);
    if (!Refined) {
      std::string Target;
      raw_string_ostream OS(Target);
      OS << "[" << M << ", " << N << "]";
      return Ctx.error("'C' " + typeStr(Ctx, 2) +
                       " does not broadcast to the result shape " + OS.str());
    }
    Shape = std::move(*Refined);
  }
  return oneResult(TensorType(A.getElementType(), Shape));
}

namespace {

/// One term of an einsum equation: its subscripts (letters) in order, and
/// where the ellipsis stands among them, if there is one.
struct EinsumTerm {
  std::string Labels;
  std::optional<size_t> Ellipsis;
};

/// What the input terms say about one subscript letter.
struct EinsumLabel {
  Dim Size;
  /// The operand that gave the letter its size, for messages.
  unsigned Operand = 0;
  /// How often the letter occurs in the input terms.
  unsigned Count = 0;
};

/// Shape inference for one Einsum node: reads the input terms against the
/// operand types, then forms the output from the explicit or implicit
/// right-hand side.
class EinsumInference {
public:
  explicit EinsumInference(const ShapeContext &Ctx) : Ctx(Ctx) {
    StringRef Given = Ctx.getAttr("equation")->getString();
    Equation = Given.str();
    for (char C : Given)
      if (C != ' ')
        Stripped.push_back(C);
  }

  InferResult infer();

private:
  Error fail(const Twine &Message) const {
    return Ctx.error("equation '" + Equation + "' " + Message);
  }
  Error parseTerm(StringRef Text, EinsumTerm &Term) const;
  Error addOperand(unsigned I, StringRef Text);
  Error addLabel(char Letter, const Dim &D, unsigned I);
  Expected<SmallVector<Dim, 4>> explicitOutput(StringRef Rhs) const;
  SmallVector<Dim, 4> implicitOutput() const;

  const ShapeContext &Ctx;
  std::string Equation, Stripped;
  /// Indexed by letter; letters are ASCII.
  std::array<EinsumLabel, 128> Labels;
  /// The broadcast of every operand's ellipsis dimensions.
  SmallVector<Dim, 4> EllipsisDims;
};

} // namespace

/// Parses one term: letters with at most one "...".
Error EinsumInference::parseTerm(StringRef Text, EinsumTerm &Term) const {
  for (size_t I = 0; I < Text.size(); ++I) {
    char C = Text[I];
    if (isAlpha(C)) {
      Term.Labels.push_back(C);
      continue;
    }
    if (C != '.')
      return fail("has an invalid character '" + Twine(C) + "'");
    if (!Text.substr(I).startswith("..."))
      return fail("has a '.' outside an ellipsis");
    if (Term.Ellipsis)
      return fail("has more than one ellipsis in the term '" + Text + "'");
    Term.Ellipsis = Term.Labels.size();
    I += 2;
  }
  return Error::success();
}

/// Records the dimension D that operand I gives Letter; an error when
/// another operand (or the same one) gave it a different one.
Error EinsumInference::addLabel(char Letter, const Dim &D, unsigned I) {
  EinsumLabel &Label = Labels[static_cast<unsigned char>(Letter)];
  if (Label.Count++ != 0 && !dimsAgree(Label.Size, D))
    return fail("gives subscript '" + Twine(Letter) +
                "' different dimensions in " + typeStr(Ctx, Label.Operand) +
                " and " + typeStr(Ctx, I));
  if (Label.Size.isUnknown()) {
    Label.Size = D;
    Label.Operand = I;
  }
  return Error::success();
}

/// Matches input term Text against operand I's shape.
Error EinsumInference::addOperand(unsigned I, StringRef Text) {
  EinsumTerm Term;
  if (Error E = parseTerm(Text, Term))
    return E;
  ArrayRef<Dim> Shape = Ctx.getOperandType(I).getShape();
  size_t Letters = Term.Labels.size();
  if (Term.Ellipsis ? Shape.size() < Letters : Shape.size() != Letters)
    return fail("has " + Twine(Letters) + " subscripts" +
                (Term.Ellipsis ? " and an ellipsis" : "") + " in '" + Text +
                "' for operand " + Twine(I) + " " + typeStr(Ctx, I));
  size_t NumEllipsisDims = Shape.size() - Letters;
  if (Term.Ellipsis) {
    std::optional<SmallVector<Dim, 4>> Broadcast = broadcastShapes(
        EllipsisDims, Shape.slice(*Term.Ellipsis, NumEllipsisDims));
    if (!Broadcast)
      return fail("has ellipsis dimensions that do not broadcast, at "
                  "operand " +
                  Twine(I) + " " + typeStr(Ctx, I));
    EllipsisDims = std::move(*Broadcast);
  }
  for (size_t L = 0; L != Letters; ++L) {
    bool AfterEllipsis = Term.Ellipsis && L >= *Term.Ellipsis;
    if (Error E = addLabel(Term.Labels[L],
                           Shape[AfterEllipsis ? L + NumEllipsisDims : L], I))
      return E;
  }
  return Error::success();
}

Expected<SmallVector<Dim, 4>>
EinsumInference::explicitOutput(StringRef Rhs) const {
  EinsumTerm Out;
  if (Error E = parseTerm(Rhs, Out))
    return E;
  SmallVector<Dim, 4> Result;
  std::array<bool, 128> InOutput{};
  for (size_t L = 0, E = Out.Labels.size(); L <= E; ++L) {
    if (Out.Ellipsis == L)
      Result.append(EllipsisDims.begin(), EllipsisDims.end());
    if (L == E)
      break;
    char C = Out.Labels[L];
    unsigned char Index = static_cast<unsigned char>(C);
    if (Labels[Index].Count == 0)
      return fail("has output subscript '" + Twine(C) +
                  "' that no input term has");
    if (InOutput[Index])
      return fail("repeats output subscript '" + Twine(C) + "'");
    InOutput[Index] = true;
    Result.push_back(Labels[Index].Size);
  }
  return Result;
}

/// numpy's implicit output: the ellipsis dimensions, then the letters that
/// occur once, in ASCII order (upper case first).
SmallVector<Dim, 4> EinsumInference::implicitOutput() const {
  SmallVector<Dim, 4> Result(EllipsisDims.begin(), EllipsisDims.end());
  for (const EinsumLabel &Label : Labels)
    if (Label.Count == 1)
      Result.push_back(Label.Size);
  return Result;
}

InferResult EinsumInference::infer() {
  if (Error E = checkSameElementType(Ctx))
    return E;
  StringRef Eq = Stripped;
  size_t Arrow = Eq.find("->");
  std::optional<StringRef> Rhs;
  if (Arrow != StringRef::npos) {
    Rhs = Eq.substr(Arrow + 2);
    if (Rhs->contains("->"))
      return fail("has more than one '->'");
  }
  SmallVector<StringRef, 4> Terms;
  Eq.substr(0, Arrow).split(Terms, ',');
  unsigned NumOperands = Ctx.getNumOperands();
  if (Terms.size() != NumOperands)
    return fail("has " + Twine(Terms.size()) +
                " input terms but the node has " + Twine(NumOperands) +
                " operands");
  for (unsigned I = 0; I != NumOperands; ++I)
    if (Error E = addOperand(I, Terms[I]))
      return E;
  Expected<SmallVector<Dim, 4>> Shape =
      Rhs ? explicitOutput(*Rhs) : implicitOutput();
  if (!Shape)
    return Shape.takeError();
  return oneResult(TensorType(Ctx.getOperandType(0).getElementType(), *Shape));
}

// ONNX Einsum (numpy.einsum) with explicit ("ij,jk->ik") or implicit ("ij,jk")
// output. A letter's dimensions must agree across operands; only ellipsis
// dimensions broadcast, aligned right as numpy does.
InferResult autopar::inferEinsum(const ShapeContext &Ctx) {
  return EinsumInference(Ctx).infer();
}

//===----------------------------------------------------------------------===//
// Normalizations
//===----------------------------------------------------------------------===//

/// Checks that operand I (a scale or bias) unidirectionally broadcasts to the
/// normalized dimensions Normalized of X, and refines their unknown
/// dimensions from it.
static Error checkNormOperand(const ShapeContext &Ctx, unsigned I,
                              SmallVectorImpl<Dim> &Normalized,
                              bool MixedPrecision = false) {
  // Mixed precision: the parameters share one floating-point type, which
  // may differ from X's.
  if (Error E = MixedPrecision
                    ? (I == 1 ? checkFloat(Ctx, I) : checkSameType(Ctx, 1, I))
                    : checkSameType(Ctx, 0, I))
    return E;
  std::optional<SmallVector<Dim, 4>> Refined =
      broadcastOnto(Ctx.getOperandType(I).getShape(), Normalized);
  if (!Refined)
    return Ctx.error("'" + operandName(Ctx, I) + "' " + typeStr(Ctx, I) +
                     " does not broadcast to the normalized dimensions of " +
                     typeStr(Ctx, 0));
  Normalized.assign(Refined->begin(), Refined->end());
  return Error::success();
}

/// The element type an ONNX `stash_type` (a TensorProto data type code)
/// names, when it is one of Allowed.
static Expected<ElementType> getStashType(const ShapeContext &Ctx,
                                          ArrayRef<int64_t> Allowed) {
  int64_t Code = Ctx.getIntAttr("stash_type", 1);
  std::optional<ElementType> Ty;
  switch (Code) {
  case 1:
    Ty = ElementType::F32;
    break;
  case 10:
    Ty = ElementType::F16;
    break;
  case 11:
    Ty = ElementType::F64;
    break;
  case 16:
    Ty = ElementType::BF16;
    break;
  }
  if (!Ty || !is_contained(Allowed, Code)) {
    std::string Codes;
    for (int64_t C : Allowed)
      Codes += (Codes.empty() ? "" : ", ") + std::to_string(C);
    return Ctx.error("'stash_type' must be one of " + Codes + ", got " +
                     Twine(Code));
  }
  return *Ty;
}

/// X's shape with the normalized dimensions, from Axis on, replaced.
static SmallVector<Dim, 4> withNormalized(ArrayRef<Dim> Shape, unsigned Axis,
                                          ArrayRef<Dim> Normalized) {
  SmallVector<Dim, 4> Result(Shape.begin(), Shape.begin() + Axis);
  Result.append(Normalized.begin(), Normalized.end());
  return Result;
}

// ONNX LayerNormalization (opset 17): Scale and B broadcast to X.shape[axis:];
// Mean and InvStdDev are X's shape with the normalized dimensions set to 1,
// of the stash type (float or bfloat16). Scale and B may have another
// floating-point type than X, as onnxruntime's kernel (its type V) and
// mixed-precision exports (f16 X, f32 Scale) have it.
InferResult autopar::inferLayerNorm(const ShapeContext &Ctx) {
  if (Error E = checkFloat(Ctx, 0))
    return E;
  const TensorType &X = Ctx.getOperandType(0);
  Expected<unsigned> Axis =
      normalizeAxis(Ctx, Ctx.getIntAttr("axis", -1), X.getRank());
  if (!Axis)
    return Axis.takeError();
  Expected<ElementType> Stash = getStashType(Ctx, {1, 16});
  if (!Stash)
    return Stash.takeError();
  SmallVector<Dim, 4> Normalized(X.getShape().begin() + *Axis,
                                 X.getShape().end());
  for (unsigned I : {1u, 2u})
    if (Ctx.hasOperand(I))
      if (Error E = checkNormOperand(Ctx, I, Normalized,
                                     /*MixedPrecision=*/true))
        return E;
  SmallVector<TensorType, 1> Types{TensorType(
      X.getElementType(), withNormalized(X.getShape(), *Axis, Normalized))};
  SmallVector<Dim, 4> Ones(Normalized.size(), Dim::get(1));
  for (unsigned I = 1, E = Ctx.getNode().getNumResults(); I != E; ++I)
    Types.push_back(
        TensorType(*Stash, withNormalized(X.getShape(), *Axis, Ones)));
  return Types;
}

// ONNX RMSNormalization (opset 23): Y has X's type; scale broadcasts to
// X.shape[axis:] and, as the function body multiplies them, has X's type.
InferResult autopar::inferRMSNorm(const ShapeContext &Ctx) {
  if (Error E = checkFloat(Ctx, 0))
    return E;
  const TensorType &X = Ctx.getOperandType(0);
  Expected<unsigned> Axis =
      normalizeAxis(Ctx, Ctx.getIntAttr("axis", -1), X.getRank());
  if (!Axis)
    return Axis.takeError();
  if (Expected<ElementType> Stash = getStashType(Ctx, {1, 10, 11, 16}); !Stash)
    return Stash.takeError();
  SmallVector<Dim, 4> Normalized(X.getShape().begin() + *Axis,
                                 X.getShape().end());
  if (Error E = checkNormOperand(Ctx, 1, Normalized))
    return E;
  return oneResult(TensorType(X.getElementType(),
                              withNormalized(X.getShape(), *Axis, Normalized)));
}

/// Checks that operand I is a vector of C elements, and refines C from it.
static Error checkChannelVector(const ShapeContext &Ctx, unsigned I, Dim &C) {
  const TensorType &T = Ctx.getOperandType(I);
  if (T.getRank() != 1 || !dimsAgree(T.getDim(0), C)) {
    std::string Expected;
    raw_string_ostream OS(Expected);
    OS << "[" << C << "]";
    return Ctx.error("'" + operandName(Ctx, I) + "' must have shape " +
                     OS.str() + " for the channels of " + typeStr(Ctx, 0) +
                     ", got " + typeStr(Ctx, I));
  }
  C = meetDims(C, T.getDim(0));
  return Error::success();
}

/// X's type with its channel dimension (1) refined to C.
static TensorType withChannels(const TensorType &X, const Dim &C) {
  SmallVector<Dim, 4> Shape(X.getShape().begin(), X.getShape().end());
  if (Shape.size() > 1)
    Shape[1] = C;
  return TensorType(X.getElementType(), Shape);
}

// ONNX BatchNormalization (opset 15): X is [N, C, ...] (or [N] with C = 1);
// scale and B share one float type, input_mean and input_var another; the
// running statistics are outputs in training mode only.
InferResult autopar::inferBatchNorm(const ShapeContext &Ctx) {
  if (Error E = checkFlag(Ctx, "training_mode"))
    return E;
  unsigned NumResults = Ctx.getNode().getNumResults();
  if (!Ctx.getIntAttr("training_mode", 0) && NumResults > 1)
    return Ctx.error("running_mean and running_var are outputs only when "
                     "'training_mode' is 1");
  const TensorType &X = Ctx.getOperandType(0);
  if (X.getRank() == 0)
    return Ctx.error("'X' must have rank 1 or more, got " + typeStr(Ctx, 0));
  for (unsigned I = 0; I != 5; ++I)
    if (Error E = checkFloat(Ctx, I))
      return E;
  if (Error E = checkSameType(Ctx, 1, 2))
    return E;
  if (Error E = checkSameType(Ctx, 3, 4))
    return E;
  Dim C = X.getRank() > 1 ? X.getDim(1) : Dim::get(1);
  for (unsigned I = 1; I != 5; ++I)
    if (Error E = checkChannelVector(Ctx, I, C))
      return E;
  SmallVector<TensorType, 1> Types{withChannels(X, C)};
  for (unsigned I = 1; I != NumResults; ++I)
    Types.push_back(TensorType(Ctx.getOperandType(I + 2).getElementType(),
                               ArrayRef<Dim>(C)));
  return Types;
}

// ONNX InstanceNormalization: input is [N, C, D1, ...] (rank 3 or more, as
// runtimes require); scale and B are [C] of the input's type.
InferResult autopar::inferInstanceNorm(const ShapeContext &Ctx) {
  if (Error E = checkFloat(Ctx, 0))
    return E;
  const TensorType &In = Ctx.getOperandType(0);
  if (In.getRank() < 3)
    return Ctx.error("'input' must have rank 3 or more, got " +
                     typeStr(Ctx, 0));
  Dim C = In.getDim(1);
  for (unsigned I : {1u, 2u}) {
    if (Error E = checkSameType(Ctx, 0, I))
      return E;
    if (Error E = checkChannelVector(Ctx, I, C))
      return E;
  }
  return oneResult(withChannels(In, C));
}
