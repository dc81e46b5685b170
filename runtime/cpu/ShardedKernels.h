//===- ShardedKernels.h - Kernels of ops split over a mesh axis -*- C++ -*-===//
//
// Per-rank programs of tensor-parallel plans (passes/LocalizeTensorParallel)
// hold ops whose operand is this rank's block of a tensor split over a mesh
// axis: ShardSlice (the block of a replicated value), and Gather,
// GatherGrad, CrossEntropyLoss and CrossEntropyLossGrad with `mesh` and
// `mesh_axis` (a vocabulary split over the axis: Megatron-LM's
// vocabulary-parallel embedding and cross-entropy). The cross-entropy
// kernels communicate with the rest of the group.
//
//===----------------------------------------------------------------------===//

#ifndef AUTOPAR_RUNTIME_CPU_SHARDEDKERNELS_H
#define AUTOPAR_RUNTIME_CPU_SHARDEDKERNELS_H

#include "runtime/ShardPlace.h"
#include "runtime/cpu/KernelSupport.h"

namespace autopar {

/// Runs a node isShardedKernel (runtime/ShardPlace.h) names; communication goes
/// through Comm with Timeout.
llvm::Error runShardedKernel(const KernelArgs &A, Communicator &Comm,
                             Communicator::Duration Timeout);

} // namespace autopar

#endif // AUTOPAR_RUNTIME_CPU_SHARDEDKERNELS_H
