//===- CpuBackend.h - The CPU backend ---------------------------*- C++ -*-===//
//
// Host memory (64-byte aligned), the kernels of Kernels.h found by the
// node's op, GEMMs through OpenBLAS with a thread count the runtime sets (1
// by default), and a single-rank communicator until MPI lands.
//
//===----------------------------------------------------------------------===//

#ifndef AUTOPAR_RUNTIME_CPU_CPUBACKEND_H
#define AUTOPAR_RUNTIME_CPU_CPUBACKEND_H

#include "runtime/Backend.h"

#include <memory>

namespace autopar {

enum class OpId : unsigned;

struct CpuBackendOptions {
  /// OpenBLAS threads. Results do not depend on it (every reduction has a
  /// fixed order); 1 keeps runs quiet on shared machines.
  int BlasThreads = 1;
};

class CpuBackend : public Backend {
public:
  explicit CpuBackend(const CpuBackendOptions &Options = CpuBackendOptions());
  ~CpuBackend() override;

  llvm::StringRef getName() const override { return "cpu"; }
  llvm::Expected<Tensor> allocate(ElementType Elem,
                                  llvm::ArrayRef<int64_t> Shape) override;
  void deallocate(const Tensor &T) override;
  llvm::Error copyFromHost(const Tensor &Dst,
                           llvm::ArrayRef<uint8_t> Bytes) override;
  llvm::Error copyToHost(const Tensor &Src,
                         llvm::MutableArrayRef<uint8_t> Bytes) override;
  llvm::Error runNode(const Node &N, llvm::ArrayRef<Tensor> Inputs,
                      llvm::ArrayRef<Tensor> Outputs) override;
  Communicator &getCommunicator() override { return *Comm; }

  /// True when the backend has a kernel for Op.
  static bool hasKernel(OpId Op);

private:
  std::unique_ptr<Communicator> Comm;
};

} // namespace autopar

#endif // AUTOPAR_RUNTIME_CPU_CPUBACKEND_H
