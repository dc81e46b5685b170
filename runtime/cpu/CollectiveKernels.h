//===- CollectiveKernels.h - Communication nodes on the CPU -----*- C++ -*-===//
//
// The kernels of the communication ops (ir/Ops.def): AllReduce, AllGather,
// ReduceScatter, AllToAll, Send, Recv and SendRecv. They find the group of
// ranks from the node's mesh and axis (CpuCommunicator.h: world ranks in
// row-major order over the mesh) and call the backend's communicator.
//
// In a job of one rank (autopar-run without mpirun), collectives without
// `local = 1` (and AllReduce, which has no per-rank form) leave their value
// as it is: a whole-model program computes whole values, so every
// collective is an identity. Per-rank collectives (`local = 1`) need the
// job to have the mesh's device count of ranks, as do Send and Recv, which
// go to the rank of pipeline stage `dst_stage` (from `src_stage`) with this
// rank's other coordinates, on the graph's first mesh with a `pp` axis.
//
//===----------------------------------------------------------------------===//

#ifndef AUTOPAR_RUNTIME_CPU_COLLECTIVEKERNELS_H
#define AUTOPAR_RUNTIME_CPU_COLLECTIVEKERNELS_H

#include "runtime/cpu/KernelSupport.h"

namespace autopar {

enum class OpId : unsigned;

/// Runs communication node A.N through Comm; every call has Timeout.
/// Errors of the communicator name the node through its
/// CommunicationLabel.
llvm::Error runCommunication(const KernelArgs &A, Communicator &Comm,
                             Communicator::Duration Timeout);

} // namespace autopar

#endif // AUTOPAR_RUNTIME_CPU_COLLECTIVEKERNELS_H
