//===- NcclCommunicator.h - Communication over NCCL -------------*- C++ -*-===//
//
// The CUDA backend's communicator: device tensors, NCCL collectives and
// point-to-point transfers.
//
// Ranks. Under mpirun the job's ranks are MPI_COMM_WORLD's, and MPI (an
// MpiCommunicator, runtime/cpu/MpiCommunicator.h) carries only the NCCL
// bootstrap: a group's first rank makes an ncclUniqueId and sends it, with
// the group's key, to the others, which check the key. Without mpirun the
// job is one rank and NCCL is never initialised: every group is {0} and
// each collective is a device copy (as SingleRankCommunicator's are).
//
// Communicators are created lazily, when a group first communicates: one
// per group of ranks (in group order, which is NCCL's rank order, so
// gathers concatenate in group order), and one per direction of each
// pipeline pair (send(A->B) and recv(B->A) never share a communicator or a
// stream, so stages that both send before they receive do not deadlock).
// Only the members take part, so programs that reach their groups in
// different orders do not block each other. Each communicator is
// non-blocking (ncclConfig_t::blocking = 0) and has its own stream;
// CudaStreams orders it against the compute stream buffer by buffer.
//
// Timeouts. Every operation is queued and returns; a watchdog thread polls
// the queued operations (cudaEventQuery, ncclCommGetAsyncError). When one
// has not completed within its timeout, or NCCL reports an error, the
// watchdog aborts every communicator (ncclCommAbort) and reports the fault
// to CudaStreams, so the backend's next wait fails with
//   rank R: all-reduce on ranks [0, 1] (axis 'dp' of mesh @cluster,
//   node '%g' (AllReduce)) timed out after T s (a peer rank is dead or hung)
// and the driver exits non-zero; under mpirun the backend then aborts the
// job (MPI_Abort). Creating a communicator has the same timeout.
//
// Sums: NCCL's, in the tensor's type (bf16 and f16 add in their own
// precision inside NCCL's ring, unlike the CPU communicator's f32); the
// result is the same on every rank but is not the CPU communicator's
// group-order sum.
//
//===----------------------------------------------------------------------===//

#ifndef AUTOPAR_RUNTIME_CUDA_NCCLCOMMUNICATOR_H
#define AUTOPAR_RUNTIME_CUDA_NCCLCOMMUNICATOR_H

#include "runtime/Backend.h"

#include <memory>

namespace autopar {

class CudaStreams;

class NcclCommunicator : public Communicator {
public:
  /// A communicator of the job: MPI's ranks when mpirun started the
  /// process (MPI is initialised here within Timeout), else one rank.
  NcclCommunicator(CudaStreams &Streams, Duration Timeout);
  ~NcclCommunicator() override;

  /// "NCCL 2.28.9" (the library loaded).
  static std::string getVersionString();

  int getRank() const override;
  int getNumRanks() const override;

  llvm::Error allReduce(const Tensor &In, const Tensor &Out,
                        llvm::ArrayRef<int> Group, Duration Timeout) override;
  llvm::Error allGather(const Tensor &In, const Tensor &Out,
                        llvm::ArrayRef<int> Group, unsigned Dim,
                        Duration Timeout) override;
  llvm::Error reduceScatter(const Tensor &In, const Tensor &Out,
                            llvm::ArrayRef<int> Group, unsigned Dim,
                            Duration Timeout) override;
  llvm::Error allToAll(const Tensor &In, const Tensor &Out,
                       llvm::ArrayRef<int> Group, unsigned SrcDim,
                       unsigned DstDim, Duration Timeout) override;
  llvm::Error send(const Tensor &In, int DstRank, Duration Timeout) override;
  llvm::Error recv(const Tensor &Out, int SrcRank, Duration Timeout) override;

  struct Impl;

private:
  std::unique_ptr<Impl> P;
};

} // namespace autopar

#endif // AUTOPAR_RUNTIME_CUDA_NCCLCOMMUNICATOR_H
