//===- KernelFamily.h - Kernel families the backends share ------*- C++ -*-===//
//
// Which kernel runs an op is a column of ir/OpFacts.def (KernelFamily,
// getKernelFamily): both backends switch on the family and map it to their
// own kernel, or to none where they have no kernel for it. What the
// backends also need to know of a family is here.
//
//===----------------------------------------------------------------------===//

#ifndef AUTOPAR_RUNTIME_KERNELFAMILY_H
#define AUTOPAR_RUNTIME_KERNELFAMILY_H

#include "ir/OpFacts.h"

#include "llvm/ADT/StringRef.h"

namespace autopar {

/// True for families whose kernels only move elements (layouts, slices,
/// gathers, data ops, communication): they take every element type as it
/// is stored.
bool onlyMovesElements(KernelFamily F);

/// The broad kind of kernel of F, for profiles (runtime/StepProfile.h):
/// gemm, attention, norm, softmax, loss, elementwise, reduce, layout,
/// optimizer or communication.
llvm::StringRef getKernelKind(KernelFamily F);

} // namespace autopar

#endif // AUTOPAR_RUNTIME_KERNELFAMILY_H
