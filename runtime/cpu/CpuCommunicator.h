//===- CpuCommunicator.h - Communication in host memory ---------*- C++ -*-===//
//
// SingleRankCommunicator: the job is one rank (rank 0), so every group is
// {0} and each collective copies its operand (a one-rank sum, gather or
// scatter is the operand itself). Point-to-point calls have no peer and are
// errors. The MPI communicator replaces it for multi-rank jobs.
//
//===----------------------------------------------------------------------===//

#ifndef AUTOPAR_RUNTIME_CPU_CPUCOMMUNICATOR_H
#define AUTOPAR_RUNTIME_CPU_CPUCOMMUNICATOR_H

#include "runtime/Backend.h"

namespace autopar {

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

private:
  llvm::Error copy(llvm::StringRef What, const Tensor &In, const Tensor &Out,
                   llvm::ArrayRef<int> Group);
};

} // namespace autopar

#endif // AUTOPAR_RUNTIME_CPU_CPUCOMMUNICATOR_H
