//===- CpuCommunicator.h - Communication in host memory ---------*- C++ -*-===//
//
// SingleRankCommunicator: the job is one rank (rank 0), so every group is
// {0} and each collective copies its operand (a one-rank sum, gather or
// scatter is the operand itself). Point-to-point calls have no peer and are
// errors. MpiCommunicator (MpiCommunicator.h) replaces it for jobs started
// by mpirun.
//
// Also what every communicator of the CPU backend shares:
// - Groups from meshes (runtime/MeshGroups.h).
// - Chunk layouts: a gather or scatter along dimension Dim moves the P
//   chunks of Dim; packChunks makes each chunk contiguous, unpackChunks
//   puts contiguous chunks back along Dim.
// - CommunicationLabel: what the communication in progress is for, for
//   messages about it.
//
//===----------------------------------------------------------------------===//

#ifndef AUTOPAR_RUNTIME_CPU_CPUCOMMUNICATOR_H
#define AUTOPAR_RUNTIME_CPU_CPUCOMMUNICATOR_H

#include "runtime/Backend.h"
#include "runtime/MeshGroups.h"

#include "llvm/ADT/SmallVector.h"

#include <string>

namespace autopar {

struct Mesh;

class SingleRankCommunicator : public Communicator {
public:
  int getRank() const override { return 0; }
  int getNumRanks() const override { return 1; }

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
  llvm::Error send(const Tensor &In, int DstRank, int Tag,
                   Duration Timeout) override;
  llvm::Error recv(const Tensor &Out, int SrcRank, int Tag,
                   Duration Timeout) override;
  /// One rank sends nothing: nothing to check.
  llvm::Error setVerifyTransfers(bool) override {
    return llvm::Error::success();
  }

private:
  llvm::Error copy(llvm::StringRef What, const Tensor &In, const Tensor &Out,
                   llvm::ArrayRef<int> Group);
};

/// Copies Src, of type Shape, into Dst so that each of the Parts chunks of
/// dimension Dim is contiguous: Src viewed as [outer, Parts, chunk] becomes
/// [Parts, outer, chunk]. Shape[Dim] must be divisible by Parts.
void packChunks(const void *Src, void *Dst, llvm::ArrayRef<int64_t> Shape,
                size_t ElemSize, unsigned Dim, int64_t Parts);
/// The inverse: Src holds Parts contiguous chunks; Dst, of type Shape,
/// gets them side by side along Dim.
void unpackChunks(const void *Src, void *Dst, llvm::ArrayRef<int64_t> Shape,
                  size_t ElemSize, unsigned Dim, int64_t Parts);
/// True when packing along Dim moves nothing (every dimension before Dim
/// is 1), so the tensor's bytes are already its chunks in order.
bool chunksAreContiguous(llvm::ArrayRef<int64_t> Shape, unsigned Dim);

/// Sets what the communication in progress is for, e.g. "axis 'tp' of
/// mesh @cluster, node '%y' (AllReduce)", while it lives; communicators
/// put it in their messages (a timeout, the launcher's termination).
class CommunicationLabel {
public:
  explicit CommunicationLabel(std::string Text);
  ~CommunicationLabel();
  CommunicationLabel(const CommunicationLabel &) = delete;
  CommunicationLabel &operator=(const CommunicationLabel &) = delete;

  /// The innermost live label, or "".
  static llvm::StringRef current();

private:
  std::string Previous;
};

} // namespace autopar

#endif // AUTOPAR_RUNTIME_CPU_CPUCOMMUNICATOR_H
