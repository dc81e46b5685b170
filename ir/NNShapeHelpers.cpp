//===- NNShapeHelpers.cpp - Checks shared by the NN shape functions -------===//

#include "ir/NNShapeHelpers.h"
#include "ir/Graph.h"

#include "llvm/ADT/STLExtras.h"

using namespace llvm;

namespace autopar {
namespace nn {

std::string dimStr(const Dim &D) {
  std::string S;
  raw_string_ostream OS(S);
  OS << D;
  return OS.str();
}

/// Operand I with its name from the op table and its type, for messages:
/// "X f32[1, 3, 8, 8]".
std::string describe(const ShapeContext &Ctx, unsigned I) {
  const OperandSpec *Spec = Ctx.getNode().getOpInfo().getOperand(I);
  return (Spec ? Spec->Name : std::string("operand")) + " " + typeStr(Ctx, I);
}

const Dim &dimOf(const ShapeContext &Ctx, unsigned I, unsigned D) {
  return Ctx.getOperandType(I).getDim(D);
}

ElementType elementTypeOf(const ShapeContext &Ctx, unsigned I) {
  return Ctx.getOperandType(I).getElementType();
}

/// True when two dimensions may be equal at run time.
bool mayEqual(const Dim &A, const Dim &B) {
  return A.isUnknown() || B.isUnknown() || A == B;
}

bool isStaticOne(const Dim &D) { return D.isStatic() && D.getSize() == 1; }

Dim ceilDivDim(const Dim &In, int64_t Divisor) {
  if (In.isStatic())
    return Dim::get((In.getSize() + Divisor - 1) / Divisor);
  if (std::optional<Dim> Q = In.divide(Dim::get(Divisor)))
    return *Q;
  return Dim();
}

/// ONNX's float types: tensor(double), float, float16, bfloat16. The
/// com.microsoft ops below take no double (AllowF64 false).
bool isFloatType(ElementType Ty, bool AllowF64) {
  return Ty == ElementType::F32 || Ty == ElementType::F16 ||
         Ty == ElementType::BF16 || (AllowF64 && Ty == ElementType::F64);
}

Error checkFloat(const ShapeContext &Ctx, unsigned I, bool AllowF64) {
  if (isFloatType(elementTypeOf(Ctx, I), AllowF64))
    return Error::success();
  return Ctx.error(describe(Ctx, I) + " must be " +
                   (AllowF64 ? "f64, f32, f16 or bf16" : "f32, f16 or bf16"));
}

/// An error unless the given operand I has operand Ref's element type.
Error checkSameElementTypeAs(const ShapeContext &Ctx, unsigned I,
                             unsigned Ref) {
  if (!Ctx.hasOperand(I) || elementTypeOf(Ctx, I) == elementTypeOf(Ctx, Ref))
    return Error::success();
  return Ctx.error(describe(Ctx, I) + " must have the element type of " +
                   describe(Ctx, Ref));
}

Error checkElementType(const ShapeContext &Ctx, unsigned I, ElementType Ty) {
  if (elementTypeOf(Ctx, I) == Ty)
    return Error::success();
  return Ctx.error(describe(Ctx, I) + " must be " + getElementTypeName(Ty));
}

Error checkIndexType(const ShapeContext &Ctx, unsigned I) {
  if (isIntegerElementType(elementTypeOf(Ctx, I)))
    return Error::success();
  return Ctx.error(describe(Ctx, I) + " must be i32 or i64");
}

Error checkRank(const ShapeContext &Ctx, unsigned I, unsigned Rank) {
  if (Ctx.getOperandType(I).getRank() == Rank)
    return Error::success();
  return Ctx.error(describe(Ctx, I) + " must have rank " + Twine(Rank));
}

/// Merges D into Known; an error naming What when both are known and
/// differ. I and J are the operands the two dimensions come from.
Error mergeDim(const ShapeContext &Ctx, Dim &Known, const Dim &D,
               const Twine &What, unsigned I, unsigned J) {
  if (!mayEqual(Known, D))
    return Ctx.error(What + " differ: " + describe(Ctx, I) + " and " +
                     describe(Ctx, J));
  Known = meetDims(Known, D);
  return Error::success();
}

/// An int attribute that must be 0 or 1.
Error checkFlag(const ShapeContext &Ctx, StringRef Name) {
  int64_t V = Ctx.getIntAttr(Name, 0);
  if (V == 0 || V == 1)
    return Error::success();
  return Ctx.error("'" + Name + "' must be 0 or 1, got " + Twine(V));
}

Error checkVector(const ShapeContext &Ctx, unsigned I) {
  if (Ctx.getOperandType(I).getRank() != 1)
    return Ctx.error(describe(Ctx, I) + " must be 1-D");
  return Error::success();
}

Expected<StringRef> getChoice(const ShapeContext &Ctx, StringRef Name,
                              ArrayRef<StringRef> Allowed) {
  const Attribute *A = Ctx.getAttr(Name);
  if (!A)
    return Allowed.front();
  StringRef V = A->getString();
  if (is_contained(Allowed, V))
    return V;
  std::string List;
  for (StringRef S : Allowed)
    List += (List.empty() ? "" : ", ") + S.str();
  return Ctx.error("'" + Name + "' must be one of " + List + ", got '" + V +
                   "'");
}

/// An optional int attribute that must be positive when given.
Expected<std::optional<int64_t>> getPositiveAttr(const ShapeContext &Ctx,
                                                 StringRef Name) {
  if (!Ctx.getAttr(Name))
    return std::nullopt;
  int64_t V = Ctx.getIntAttr(Name, 0);
  if (V < 1)
    return Ctx.error("'" + Name + "' must be positive, got " + Twine(V));
  return std::optional<int64_t>(V);
}

/// Hidden / Heads as a dimension: unknown when the quotient is not a
/// monomial, an error when a static Hidden is not divisible. Hidden is
/// dimension D of operand I; HeadsWhat names the divisor in messages.
Expected<Dim> splitHeads(const ShapeContext &Ctx, unsigned I, unsigned D,
                         int64_t Heads, const Twine &HeadsWhat) {
  const Dim &Hidden = dimOf(Ctx, I, D);
  if (std::optional<Dim> Q = Hidden.divide(Dim::get(Heads)))
    return *Q;
  if (Hidden.isStatic())
    return Ctx.error("dimension " + Twine(D) + " of " + describe(Ctx, I) +
                     " is not divisible by " + HeadsWhat + " " + Twine(Heads));
  return Dim();
}

} // namespace nn
} // namespace autopar
