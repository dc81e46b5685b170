//===- CpuBackend.h - The CPU backend ---------------------------*- C++ -*-===//
//
// Host memory (64-byte aligned; what a run allocates comes from an arena
// planned from the program's liveness, StepArena.h), the kernels of Kernels.h
// found by the node's op, GEMMs through OpenBLAS with a thread count the
// runtime sets (1 by default), and the communication ops (CollectiveKernels.h)
// through an MPI communicator when the process was started by mpirun, else
// through the single-rank communicator. Under MPI, a backend one of whose nodes
// failed aborts the job when it is destroyed, so that the other ranks do not
// wait for this one.
//
//===----------------------------------------------------------------------===//

#ifndef AUTOPAR_RUNTIME_CPU_CPUBACKEND_H
#define AUTOPAR_RUNTIME_CPU_CPUBACKEND_H

#include "runtime/Backend.h"
#include "runtime/cpu/StepArena.h"

#include <algorithm>
#include <chrono>
#include <memory>

namespace autopar {

enum class OpId : unsigned;

struct CpuBackendOptions {
  /// OpenBLAS threads. Results do not depend on it (every reduction has a
  /// fixed order); 1 keeps runs quiet on shared machines.
  int BlasThreads = 1;
  /// How long a communication may take before the job is aborted
  /// (MpiCommunicator.h): AUTOPAR_COMM_TIMEOUT seconds when that
  /// environment variable is set, else 300 s.
  std::chrono::milliseconds CommTimeout = getDefaultCommTimeout();

  static std::chrono::milliseconds getDefaultCommTimeout();
  /// Sets CommTimeout to Seconds when it is positive (an option such as
  /// autopar-run's --comm-timeout; 0 keeps the default).
  void setCommTimeoutSeconds(double Seconds) {
    if (Seconds > 0)
      CommTimeout = std::chrono::milliseconds(
          std::max<int64_t>(1, int64_t(Seconds * 1000)));
  }
};

class CpuBackend : public Backend {
public:
  explicit CpuBackend(const CpuBackendOptions &Options = CpuBackendOptions());
  ~CpuBackend() override;

  llvm::StringRef getName() const override { return "cpu"; }
  llvm::Expected<Tensor> allocate(ElementType Elem,
                                  llvm::ArrayRef<int64_t> Shape) override;
  void deallocate(const Tensor &T) override;
  void beginRun(const void *Program) override { Arena.beginRun(Program); }
  void endRun() override { Arena.endRun(); }
  std::string describeMemoryPlan() const override { return Arena.describe(); }
  llvm::Error copyFromHost(const Tensor &Dst,
                           llvm::ArrayRef<uint8_t> Bytes) override;
  llvm::Error copyToHost(const Tensor &Src,
                         llvm::MutableArrayRef<uint8_t> Bytes) override;
  llvm::Error runNode(const Node &N, llvm::ArrayRef<Tensor> Inputs,
                      llvm::ArrayRef<Tensor> Outputs) override;
  /// A group of f32 AdamW steps runs as one loop over all their elements
  /// (runAdamWGroup), a Linear and its epilogue fused (runLinearEpilogue);
  /// anything else node by node.
  llvm::Error runNodes(llvm::ArrayRef<const Node *> Nodes,
                       llvm::ArrayRef<llvm::ArrayRef<Tensor>> Inputs,
                       llvm::ArrayRef<llvm::ArrayRef<Tensor>> Outputs) override;
  Communicator &getCommunicator() override { return *Comm; }
  Communicator::Duration getCommTimeout() const override { return CommTimeout; }

  /// True when the backend has a kernel for Op.
  static bool hasKernel(OpId Op);

private:
  llvm::Error runKernel(const Node &N, llvm::ArrayRef<Tensor> Inputs,
                        llvm::ArrayRef<Tensor> Outputs);

  std::unique_ptr<Communicator> Comm;
  std::chrono::milliseconds CommTimeout;
  StepArena Arena;
};

} // namespace autopar

#endif // AUTOPAR_RUNTIME_CPU_CPUBACKEND_H
