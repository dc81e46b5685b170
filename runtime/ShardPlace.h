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

/// Ops that split a tensor over a mesh axis inside their kernel: ShardSlice,
/// and Gather, GatherGrad and the cross-entropy ops with `mesh_axis`.
bool isShardedKernel(const Node &N);

/// The place of this rank along the axis of A's node (ShardSlice's `axis`,
/// the others' `mesh_axis`) on its `mesh`; an error unless the node has its
/// first operand and result. In a job of one rank the group is that rank
/// alone.
llvm::Expected<ShardPlace> getShardPlace(const KernelArgs &A,
                                         const Communicator &Comm);

/// This rank's place along axis Axis of A's mesh (attribute `mesh`), also
/// what a collective node runs among (runtime/cpu/CollectiveKernels.cpp).
/// A job of one rank is a group of one, unless WholeMesh: then the mesh's
/// group, which a one-rank job must match.
llvm::Expected<ShardPlace> getMeshAxisPlace(const KernelArgs &A,
                                            const Communicator &Comm,
                                            llvm::StringRef Axis,
                                            bool WholeMesh = false);

/// The group a collective node (AllReduce, AllGather, ReduceScatter,
/// AllToAll) runs among and this rank's place in it: its `axis` of its
/// `mesh`, the whole mesh's group when the node is `local = 1` (per-rank
/// programs).
llvm::Expected<ShardPlace> getCollectivePlace(const KernelArgs &A,
                                              const Communicator &Comm);

/// A vocabulary-parallel Gather's (or GatherGrad's) block: this rank holds
/// rows [Offset, Offset + Rows) of Total, Inner elements each; Count
/// indices (after checking axis 0, the result's shape, and GatherGrad's
/// dY).
struct ShardedGatherPlan {
  int64_t Rows = 0, Offset = 0, Total = 0, Inner = 0, Count = 0;
};
llvm::Expected<ShardedGatherPlan> planShardedGather(const KernelArgs &A,
                                                    const ShardPlace &P);

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
