//===- ShapeFunctionsElementwise.cpp - ONNX's other elementwise ops -------===//
//
// Verifiers and shape functions of the elementwise ops and reductions that
// issue 22 added: variadic Min, Max and Mean; Mod, BitShift and the bitwise
// ops; PRelu; Sign, Shrink and Clip (numeric), IsNaN and IsInf (float to
// bool); ArgMax and ArgMin. Each follows the type constraints and shape
// inference of the ONNX operator of the same name at the newest opset.
//
//===----------------------------------------------------------------------===//

#include "ir/Graph.h"
#include "ir/ShapeChecks.h"
#include "ir/ShapeFunctions.h"

#include "llvm/ADT/STLExtras.h"

using namespace autopar;
using namespace llvm;

/// An error unless operand I has an integer element type (i64, i32, i8,
/// u8; not bool).
static Error checkInteger(const ShapeContext &Ctx, unsigned I) {
  ElementType Ty = Ctx.getOperandType(I).getElementType();
  if (!isFloatElementType(Ty) && Ty != ElementType::Bool)
    return Error::success();
  return Ctx.error("'" + operandName(Ctx, I) + "' must be an integer, got " +
                   typeStr(Ctx, I));
}

// ONNX Min and Max: one numeric type, numpy broadcasting of every operand.
InferResult autopar::inferNumericBroadcast(const ShapeContext &Ctx) {
  if (Error E = checkSameElementType(Ctx))
    return E;
  if (Error E = checkNumeric(Ctx, 0))
    return E;
  return broadcastResult(Ctx, Ctx.getOperandType(0).getElementType());
}

// ONNX Mean: one floating-point type.
InferResult autopar::inferFloatBroadcast(const ShapeContext &Ctx) {
  if (Error E = checkSameElementType(Ctx))
    return E;
  if (Error E = checkFloat(Ctx, 0))
    return E;
  return broadcastResult(Ctx, Ctx.getOperandType(0).getElementType());
}

// ONNX Mod: fmod is 0 or 1, and must be 1 for floating-point operands
// (the spec's "fmod=0 is only for integers").
Error autopar::verifyMod(const ShapeContext &Ctx) {
  if (Error E = checkFlag(Ctx, "fmod"))
    return E;
  if (Ctx.getIntAttr("fmod", 0) == 0 &&
      isFloatElementType(Ctx.getOperandType(0).getElementType()))
    return Ctx.error("'fmod' must be 1 for floating-point operands, got 0 "
                     "with " +
                     typeStr(Ctx, 0) +
                     ": ONNX Mod's fmod = 0 (the remainder with the "
                     "divisor's sign) is for integers; export with "
                     "fmod = 1 (C's fmod)");
  return Error::success();
}

Error autopar::verifyBitShift(const ShapeContext &Ctx) {
  StringRef Direction = Ctx.getAttr("direction")->getString();
  if (Direction != "LEFT" && Direction != "RIGHT")
    return Ctx.error("'direction' must be \"LEFT\" or \"RIGHT\", got \"" +
                     Direction + "\"");
  return Error::success();
}

// ONNX BitShift takes unsigned integers; u8 is the only unsigned element
// type the IR has (the importer refuses uint16, uint32 and uint64 tensors).
InferResult autopar::inferBitShift(const ShapeContext &Ctx) {
  if (Error E = checkSameElementType(Ctx))
    return E;
  if (Ctx.getOperandType(0).getElementType() != ElementType::U8)
    return Ctx.error("'X' must be an unsigned integer, got " + typeStr(Ctx, 0) +
                     " (ONNX BitShift takes unsigned integers; u8 is the "
                     "only unsigned element type autopar has)");
  return broadcastResult(Ctx, ElementType::U8);
}

// ONNX BitwiseAnd, BitwiseOr, BitwiseXor and BitwiseNot: one integer type.
InferResult autopar::inferBitwise(const ShapeContext &Ctx) {
  if (Error E = checkSameElementType(Ctx))
    return E;
  if (Error E = checkInteger(Ctx, 0))
    return E;
  return broadcastResult(Ctx, Ctx.getOperandType(0).getElementType());
}

// ONNX PRelu: slope has X's numeric type and broadcasts to X one way; Y has
// X's shape.
InferResult autopar::inferPRelu(const ShapeContext &Ctx) {
  if (Error E = checkNumeric(Ctx, 0))
    return E;
  if (Error E = checkSameType(Ctx, 0, 1))
    return E;
  const TensorType &X = Ctx.getOperandType(0);
  std::optional<SmallVector<Dim, 4>> Shape =
      broadcastOnto(Ctx.getOperandType(1).getShape(), X.getShape());
  if (!Shape)
    return Ctx.error("'slope' " + typeStr(Ctx, 1) +
                     " does not broadcast to 'X' " + typeStr(Ctx, 0));
  return oneResult(TensorType(X.getElementType(), *Shape));
}

// ONNX Sign and Shrink: any numeric type, kept.
InferResult autopar::inferNumericUnary(const ShapeContext &Ctx) {
  if (Error E = checkNumeric(Ctx, 0))
    return E;
  return oneResult(Ctx.getOperandType(0));
}

Error autopar::verifyIsInf(const ShapeContext &Ctx) {
  for (StringRef Flag : {"detect_negative", "detect_positive"})
    if (Error E = checkFlag(Ctx, Flag))
      return E;
  return Error::success();
}

// ONNX IsNaN and IsInf: a floating-point X, a bool Y of its shape.
InferResult autopar::inferFloatClass(const ShapeContext &Ctx) {
  if (Error E = checkFloat(Ctx, 0))
    return E;
  return oneResult(
      TensorType(ElementType::Bool, Ctx.getOperandType(0).getShape()));
}

// ONNX Clip (opset 13): numeric input; min and max, when given, are scalars
// of its type (runtimes also take one-element tensors).
InferResult autopar::inferClip(const ShapeContext &Ctx) {
  if (Error E = checkNumeric(Ctx, 0))
    return E;
  for (unsigned I : {1u, 2u}) {
    if (!Ctx.hasOperand(I))
      continue;
    if (Error E = checkSameType(Ctx, 0, I))
      return E;
    const TensorType &T = Ctx.getOperandType(I);
    bool OneElement = T.getRank() == 0 ||
                      (T.getRank() == 1 &&
                       (T.getDim(0).isUnknown() || T.getDim(0) == Dim::get(1)));
    if (!OneElement)
      return Ctx.error("'" + operandName(Ctx, I) + "' must be a scalar, got " +
                       typeStr(Ctx, I));
  }
  return oneResult(Ctx.getOperandType(0));
}

Error autopar::verifyArgReduce(const ShapeContext &Ctx) {
  for (StringRef Flag : {"keepdims", "select_last_index"})
    if (Error E = checkFlag(Ctx, Flag))
      return E;
  return Error::success();
}

// ONNX ArgMax and ArgMin: numeric data of rank 1 or more; i64 indices of
// data's shape with `axis` (default 0) set to 1, or removed without
// keepdims.
InferResult autopar::inferArgReduce(const ShapeContext &Ctx) {
  if (Error E = checkNumeric(Ctx, 0))
    return E;
  const TensorType &Data = Ctx.getOperandType(0);
  if (Data.getRank() == 0)
    return Ctx.error("'data' must have rank 1 or more, got " + typeStr(Ctx, 0));
  Expected<unsigned> Axis =
      normalizeAxis(Ctx, Ctx.getIntAttr("axis", 0), Data.getRank());
  if (!Axis)
    return Axis.takeError();
  SmallVector<Dim, 4> Shape(Data.getShape().begin(), Data.getShape().end());
  if (Ctx.getIntAttr("keepdims", 1))
    Shape[*Axis] = Dim::get(1);
  else
    Shape.erase(Shape.begin() + *Axis);
  return oneResult(TensorType(ElementType::I64, Shape));
}
