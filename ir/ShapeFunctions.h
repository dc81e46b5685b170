//===- ShapeFunctions.h - Verifiers and shape functions of ops --*- C++ -*-===//
//
// The Verify and Infer columns of Ops.def. Shape functions assume operand
// types are already verified (defined, well-formed) and attributes match the
// op's schema; they check what depends on the op's semantics.
//
//===----------------------------------------------------------------------===//

#ifndef AUTOPAR_IR_SHAPEFUNCTIONS_H
#define AUTOPAR_IR_SHAPEFUNCTIONS_H

#include "ir/OpRegistry.h"

#include <utility>

namespace autopar {

using InferResult = llvm::Expected<llvm::SmallVector<TensorType, 1>>;

llvm::Error verifyReduce(const ShapeContext &Ctx);
llvm::Error verifyTranspose(const ShapeContext &Ctx);

InferResult inferBroadcast(const ShapeContext &Ctx);
InferResult inferSameAsOperand(const ShapeContext &Ctx);
InferResult inferMatMul(const ShapeContext &Ctx);
InferResult inferReduce(const ShapeContext &Ctx);
InferResult inferConstant(const ShapeContext &Ctx);
InferResult inferShape(const ShapeContext &Ctx);
InferResult inferReshape(const ShapeContext &Ctx);
InferResult inferTranspose(const ShapeContext &Ctx);
InferResult inferConcat(const ShapeContext &Ctx);
InferResult inferGather(const ShapeContext &Ctx);
InferResult inferUnsqueeze(const ShapeContext &Ctx);
/// The node's declared result types (for ops autopar does not know).
InferResult inferDeclared(const ShapeContext &Ctx);

/// The [start, end) range of dimensions a Shape node returns for an operand
/// of rank Rank, after ONNX's clamping of negative and out-of-range bounds.
std::pair<unsigned, unsigned> getShapeRange(const ShapeContext &Ctx,
                                            unsigned Rank);

/// Broadcasts two shapes as numpy does; nullopt when they do not broadcast.
std::optional<llvm::SmallVector<Dim, 4>> broadcastShapes(llvm::ArrayRef<Dim> A,
                                                         llvm::ArrayRef<Dim> B);

} // namespace autopar

#endif // AUTOPAR_IR_SHAPEFUNCTIONS_H
