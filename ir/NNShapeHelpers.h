//===- NNShapeHelpers.h - Checks of the NN shape functions ------*- C++ -*-===//
//
// Messages and checks that the shape functions of convolution, pooling and
// attention ops (ShapeFunctionsConv.cpp, ShapeFunctionsAttention.cpp) share.
//
//===----------------------------------------------------------------------===//

#ifndef AUTOPAR_IR_NNSHAPEHELPERS_H
#define AUTOPAR_IR_NNSHAPEHELPERS_H

#include "ir/ShapeFunctions.h"

#include <optional>
#include <string>

namespace autopar {
namespace nn {

using Types = llvm::SmallVector<TensorType, 1>;

std::string dimStr(const Dim &D);
/// Operand I with its name from the op table and its type, for messages:
/// "X f32[1, 3, 8, 8]".
std::string describe(const ShapeContext &Ctx, unsigned I);
const Dim &dimOf(const ShapeContext &Ctx, unsigned I, unsigned D);
ElementType elementTypeOf(const ShapeContext &Ctx, unsigned I);
/// True when two dimensions may be equal at run time.
bool mayEqual(const Dim &A, const Dim &B);
bool isStaticOne(const Dim &D);
/// ONNX's float types: tensor(double), float, float16, bfloat16. The
/// com.microsoft ops take no double (AllowF64 false).
bool isFloatType(ElementType Ty, bool AllowF64);
llvm::Error checkFloat(const ShapeContext &Ctx, unsigned I,
                       bool AllowF64 = true);
/// An error unless the given operand I has operand Ref's element type.
llvm::Error checkSameElementTypeAs(const ShapeContext &Ctx, unsigned I,
                                   unsigned Ref);
llvm::Error checkElementType(const ShapeContext &Ctx, unsigned I,
                             ElementType Ty);
llvm::Error checkIndexType(const ShapeContext &Ctx, unsigned I);
llvm::Error checkRank(const ShapeContext &Ctx, unsigned I, unsigned Rank);
/// Merges D into Known; an error naming What when both are known and
/// differ. I and J are the operands the two dimensions come from.
llvm::Error mergeDim(const ShapeContext &Ctx, Dim &Known, const Dim &D,
                     const llvm::Twine &What, unsigned I, unsigned J);
/// ceil(In / Divisor) (SAME padding's output size, a count of blocks): static
/// for a static In, the quotient of a symbolic one it divides, else unknown.
Dim ceilDivDim(const Dim &In, int64_t Divisor);
/// An error unless operand I is 1-D.
llvm::Error checkVector(const ShapeContext &Ctx, unsigned I);
/// The string attribute Name, which must be one of Allowed when present;
/// Allowed's first entry when absent.
llvm::Expected<llvm::StringRef>
getChoice(const ShapeContext &Ctx, llvm::StringRef Name,
          llvm::ArrayRef<llvm::StringRef> Allowed);
/// An int attribute that must be 0 or 1.
llvm::Error checkFlag(const ShapeContext &Ctx, llvm::StringRef Name);
/// An optional int attribute that must be positive when given.
llvm::Expected<std::optional<int64_t>> getPositiveAttr(const ShapeContext &Ctx,
                                                       llvm::StringRef Name);
/// Hidden / Heads as a dimension: unknown when the quotient is not a
/// monomial, an error when a static Hidden is not divisible. Hidden is
/// dimension D of operand I; HeadsWhat names the divisor in messages.
llvm::Expected<Dim> splitHeads(const ShapeContext &Ctx, unsigned I, unsigned D,
                               int64_t Heads, const llvm::Twine &HeadsWhat);

} // namespace nn
} // namespace autopar

#endif // AUTOPAR_IR_NNSHAPEHELPERS_H
