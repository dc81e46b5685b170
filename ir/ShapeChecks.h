//===- ShapeChecks.h - Checks the math shape functions share ----*- C++ -*-===//
//
// Operand checks and result helpers of ShapeFunctionsMath.cpp, shared with
// ShapeFunctionsElementwise.cpp (the other shape function files keep their
// own).
//
//===----------------------------------------------------------------------===//

#ifndef AUTOPAR_IR_SHAPECHECKS_H
#define AUTOPAR_IR_SHAPECHECKS_H

#include "ir/ShapeFunctions.h"

#include <optional>
#include <string>

namespace autopar {

/// One result of type Type.
InferResult oneResult(TensorType Type);
/// The name Ops.def gives operand I, for messages.
std::string operandName(const ShapeContext &Ctx, unsigned I);
/// An error unless the int attribute Name, when present, is 0 or 1.
llvm::Error checkFlag(const ShapeContext &Ctx, llvm::StringRef Name);
/// An error unless operand I has element type Ty.
llvm::Error checkElementType(const ShapeContext &Ctx, unsigned I,
                             ElementType Ty);
/// An error unless operand I has a floating-point element type.
llvm::Error checkFloat(const ShapeContext &Ctx, unsigned I);
/// An error when operand I is bool (ONNX's numeric type constraints).
llvm::Error checkNumeric(const ShapeContext &Ctx, unsigned I);
/// An error unless operands I and J have the same element type.
llvm::Error checkSameType(const ShapeContext &Ctx, unsigned I, unsigned J);
/// One result of element type Ty and the broadcast shape of all operands.
InferResult broadcastResult(const ShapeContext &Ctx, ElementType Ty);
/// ONNX unidirectional broadcasting of Shape onto Target: Shape has at most
/// Target's rank and each of its dimensions, aligned right, is 1 or equal to
/// Target's. Returns Target with the unknown dimensions that Shape
/// determines filled in, or nullopt when Shape does not broadcast.
std::optional<llvm::SmallVector<Dim, 4>>
broadcastOnto(llvm::ArrayRef<Dim> Shape, llvm::ArrayRef<Dim> Target);

} // namespace autopar

#endif // AUTOPAR_IR_SHAPECHECKS_H
