//===- MpiCommunicator.h - Communication over MPI ---------------*- C++ -*-===//
//
// The communicator of a job started by mpirun (OpenMPI): one rank per
// process, the job's ranks are MPI_COMM_WORLD's.
//
// Every operation is built from non-blocking point-to-point messages
// (MPI_Isend/MPI_Irecv on MPI_COMM_WORLD, a tag per kind of operation)
// among the group's world ranks, so no sub-communicator is ever created (an
// MPI_Comm_split is collective over the whole world and blocks without a
// timeout, and the pipeline stages' programs reach their first collectives
// in different orders). Sums are deterministic: all-reduce is a
// reduce-scatter, where the owner of each chunk adds the group's
// contributions in group order, then an all-gather of the owners' chunks, so
// every rank gets the same bits whatever the process placement and the
// message timing.
//
// Timeouts. Each operation polls its requests (MPI_Test) until they are done
// or its timeout has passed. On a timeout it prints
//   autopar-run: error: rank R: <operation> on <group> timed out after T s
//   (a peer rank is dead or hung; waiting for rank S)
// and calls MPI_Abort, which makes mpirun end every rank with a non-zero
// status. A rank that mpirun terminates (SIGTERM, because another rank died,
// failed or aborted) prints what it was doing, then runs the SIGTERM
// handler the process had before MPI started (the training loop's), or
// exits. MPI errors are returned (MPI_ERRORS_RETURN), never fatal inside
// MPI.
//
// Sends complete lazily: send() copies the tensor, starts an MPI_Isend and
// returns, so two neighbouring pipeline stages that both send before they
// receive (1F1B) do not deadlock. Pending sends are completed at exit, with
// the timeout, before a final barrier (with the timeout) and MPI_Finalize.
//
// Lifetime. MPI is initialised once per process, by the first
// MpiCommunicator, and finalised at exit. A job whose rank failed (see
// noteFailure) is aborted instead, so that the other ranks do not wait for
// it.
//
// --verify-transfers (setVerifyTransfers): a send appends the CRC32C of the
// tensor's bytes (4 bytes, little-endian) to its message, and the receive
// takes the message into a buffer of its own, checks the CRC and copies the
// bytes out: one more pass over the bytes at each end (ISA-L's crc32_iscsi,
// tens of GB/s) and a copy at the receiver. A mismatch is an error naming
// both ranks and both CRCs. AUTOPAR_TEST_CORRUPT_SEND=R[:N] makes rank R
// flip a byte of its Nth checked send (default the first) after the CRC is
// taken, as a faulty link would.
//
// Test-only faults (for test/Runtime/mpi-faults.test): with
// AUTOPAR_TEST_HANG_RANK=R[:N] rank R sleeps forever when it starts its Nth
// operation (default the first); AUTOPAR_TEST_KILL_RANK=R[:N] kills it
// there with SIGKILL. R:N:A does so only when AUTOPAR_LAUNCH_ATTEMPT is A
// (`autopar launch`'s attempt: the restarted job runs on); a
// comma-separated list gives one per attempt.
//
//===----------------------------------------------------------------------===//

#ifndef AUTOPAR_RUNTIME_CPU_MPICOMMUNICATOR_H
#define AUTOPAR_RUNTIME_CPU_MPICOMMUNICATOR_H

#include "runtime/Backend.h"

#include <memory>

namespace autopar {

class MpiCommunicator : public Communicator {
public:
  /// True when this process was started by mpirun (OMPI_COMM_WORLD_SIZE or
  /// PMIX_RANK is set).
  static bool isLaunchedByMpi();
  /// Initialises MPI when no communicator has yet. Timeout bounds
  /// MPI_Init, and the pending sends, final barrier and MPI_Finalize at
  /// exit (the longest given wins).
  explicit MpiCommunicator(Duration Timeout);
  ~MpiCommunicator() override;

  /// Marks this rank as failed: at exit the job is aborted instead of
  /// finalised. The CPU backend calls it when a node fails.
  static void noteFailure();
  /// Aborts the job now (MPI_Abort) when a failure was noted; returns
  /// otherwise.
  static void abortIfFailed();

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
  /// Tag T travels as MPI tag 106 + T (the collectives use 101-105); it
  /// must not exceed MPI_TAG_UB.
  llvm::Error send(const Tensor &In, int DstRank, int Tag,
                   Duration Timeout) override;
  llvm::Error recv(const Tensor &Out, int SrcRank, int Tag,
                   Duration Timeout) override;
  llvm::Error setVerifyTransfers(bool On) override;
};

} // namespace autopar

#endif // AUTOPAR_RUNTIME_CPU_MPICOMMUNICATOR_H
