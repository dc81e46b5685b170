//===- Folders.h - Constant folding of shape arithmetic ---------*- C++ -*-===//
//
// The Fold column of Ops.def. Folders compute integer tensors only (the
// arithmetic on shapes that exporters emit around Reshape and Expand) and
// only small ones; floating-point constants are left for the runtime.
//
//===----------------------------------------------------------------------===//

#ifndef AUTOPAR_IR_FOLDERS_H
#define AUTOPAR_IR_FOLDERS_H

#include "ir/OpRegistry.h"

namespace autopar {

/// Folders refuse to produce tensors with more elements than this.
constexpr int64_t MaxFoldedElements = 4096;

using FoldResult = std::optional<llvm::SmallVector<DenseTensor, 1>>;

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
