//===- ShardPlace.h - A rank's block of an op split over a mesh -*- C++ -*-===//
//
// Ops that split a tensor over a mesh axis inside one kernel (ShardSlice,
// the vocabulary-parallel Gather and cross-entropy) need this rank's group
// along the axis and its position in it: the block it holds is Index times
// the local size. Both backends' kernels of those ops read it from here.
//
//===----------------------------------------------------------------------===//

#ifndef AUTOPAR_RUNTIME_SHARDPLACE_H
#define AUTOPAR_RUNTIME_SHARDPLACE_H

#include "runtime/Backend.h"
#include "runtime/KernelArgs.h"

#include "llvm/ADT/SmallVector.h"

#include <string>

namespace autopar {

/// This rank's place in the group of a node's mesh axis.
struct ShardPlace {
  llvm::SmallVector<int, 8> Ranks;
  int64_t Index = 0;
  /// What a collective of the op is about, for errors and traces.
  std::string Label;
};

/// The place of this rank along the axis that attribute AxisAttr of A's node
/// names on its `mesh`. In a job of one rank the group is that rank alone.
llvm::Expected<ShardPlace> getShardPlace(const KernelArgs &A,
                                         const Communicator &Comm,
                                         llvm::StringRef AxisAttr);

/// ShardSlice's copy: Outer runs of Run bytes, this rank's run of each
/// group of P.Ranks.size() consecutive ones (after checking `dim` and the
/// result's shape).
struct ShardSlicePlan {
  int64_t Outer = 0;
  size_t Run = 0;
};
llvm::Expected<ShardSlicePlan> planShardSlice(const KernelArgs &A,
                                              const ShardPlace &P);

} // namespace autopar

#endif // AUTOPAR_RUNTIME_SHARDPLACE_H
