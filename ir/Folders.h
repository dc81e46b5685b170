//===- Folders.h - Constant folding of shape arithmetic ---------*- C++ -*-===//
//
// The Fold column of Ops.def. Folders compute integer and bool tensors only
// (the arithmetic on shapes that exporters emit around Reshape and Expand,
// and the masks computed from it) and only small ones; floating-point
// constants are left for the runtime.
//
//===----------------------------------------------------------------------===//

#ifndef AUTOPAR_IR_FOLDERS_H
#define AUTOPAR_IR_FOLDERS_H

#include "ir/OpRegistry.h"

namespace autopar {

/// Folders refuse to produce tensors with more elements than this.
constexpr int64_t MaxFoldedElements = 4096;

using FoldResult = std::optional<llvm::SmallVector<DenseTensor, 1>>;

// Helpers for folders.

/// The node's single result type when it is a static integer (or bool) type
/// of at most MaxFoldedElements elements.
std::optional<TensorType> getFoldableResultType(const Node &N);
/// A fold result of one integer tensor.
FoldResult makeIntResult(TensorType Type, std::vector<int64_t> Values);
/// Row-major strides of a static shape.
llvm::SmallVector<int64_t, 4> getRowMajorStrides(llvm::ArrayRef<int64_t> Sizes);
/// Advances a row-major multi-index; returns false after the last one.
bool nextRowMajorIndex(llvm::MutableArrayRef<int64_t> Index,
                       llvm::ArrayRef<int64_t> Sizes);

FoldResult foldIntBinary(const Node &N,
                         llvm::ArrayRef<const DenseTensor *> Operands);
FoldResult foldIntUnary(const Node &N,
                        llvm::ArrayRef<const DenseTensor *> Operands);
FoldResult foldReshape(const Node &N,
                       llvm::ArrayRef<const DenseTensor *> Operands);
FoldResult foldConcat(const Node &N,
                      llvm::ArrayRef<const DenseTensor *> Operands);
FoldResult foldGather(const Node &N,
                      llvm::ArrayRef<const DenseTensor *> Operands);

FoldResult foldIntCompare(const Node &N,
                          llvm::ArrayRef<const DenseTensor *> Operands);
/// Variadic Min and Max of integer constants.
FoldResult foldIntMinMax(const Node &N,
                         llvm::ArrayRef<const DenseTensor *> Operands);
/// Mod of integer constants, by `fmod` (0: the divisor's sign; 1: C's).
FoldResult foldIntMod(const Node &N,
                      llvm::ArrayRef<const DenseTensor *> Operands);
FoldResult foldWhere(const Node &N,
                     llvm::ArrayRef<const DenseTensor *> Operands);
FoldResult foldCast(const Node &N,
                    llvm::ArrayRef<const DenseTensor *> Operands);
FoldResult foldConstantOfShape(const Node &N,
                               llvm::ArrayRef<const DenseTensor *> Operands);
FoldResult foldRange(const Node &N,
                     llvm::ArrayRef<const DenseTensor *> Operands);
FoldResult foldSlice(const Node &N,
                     llvm::ArrayRef<const DenseTensor *> Operands);
FoldResult foldExpand(const Node &N,
                      llvm::ArrayRef<const DenseTensor *> Operands);

} // namespace autopar

#endif // AUTOPAR_IR_FOLDERS_H
