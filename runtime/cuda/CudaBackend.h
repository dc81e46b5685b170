//===- CudaBackend.h - The CUDA backend -------------------------*- C++ -*-===//
//
// Device memory from a caching allocator over cudaMalloc (CudaAllocator.h),
// kernels on one compute stream (CudaOps.h: cuBLAS GEMMs, the kernels of
// CudaKernels.h), communication through NCCL on streams of its own
// (NcclCommunicator.h, ordered by CudaStreams.h). Work is queued and runs
// asynchronously; the backend waits only when the host needs data:
// copyToHost, the values of integer operands it has no host copy of, and
// synchronize().
//
// The host path. Shape arithmetic (Shape, Size, Constant, ConstantOfShape,
// and nodes whose operands are all integer or bool tensors of up to 64 KiB
// and whose results are that small too) runs on the CPU backend's kernels.
// The results are uploaded once and kept per node with the operand values
// they were computed from; later runs with the same values copy them on the
// device, so a training step's shape arithmetic costs device copies only.
// Small integer tensors (up to 4 KiB) written from the host keep a host
// copy, so such nodes and the kernels that read shapes from operands
// (Slice, Trilu's k, reduction axes, AdamW's step) rarely wait.
//
// Errors. A kernel's launch failure is the node's error at once. Checks on
// the device (an index or label out of range) and asynchronous CUDA errors
// surface at the next wait, as an error naming the node (for a check) or
// the last node queued (for a CUDA error).
//
// Under mpirun, a backend one of whose nodes failed aborts the job when it
// is destroyed, as the CPU backend does.
//
//===----------------------------------------------------------------------===//

#ifndef AUTOPAR_RUNTIME_CUDA_CUDABACKEND_H
#define AUTOPAR_RUNTIME_CUDA_CUDABACKEND_H

#include "runtime/Backend.h"

#include <algorithm>
#include <chrono>
#include <memory>
#include <string>

namespace autopar {

struct CudaBackendOptions {
  /// The device; -1: the process's local rank (OMPI_COMM_WORLD_LOCAL_RANK,
  /// LOCAL_RANK) modulo the device count, else 0.
  int Device = -1;
  /// Let fp32 GEMMs use TF32 tensor cores (off: fp32 GEMMs are fp32).
  bool AllowTF32 = false;
  /// How long one communication may take (as CpuBackendOptions).
  std::chrono::milliseconds CommTimeout{300 * 1000};
  void setCommTimeoutSeconds(double Seconds) {
    if (Seconds > 0)
      CommTimeout = std::chrono::milliseconds(
          std::max<int64_t>(1, int64_t(Seconds * 1000)));
  }
};

/// The number of CUDA devices, or an error that says why there is none
/// ("no CUDA device: ...").
llvm::Expected<int> getCudaDeviceCount();

class CudaBackend : public Backend {
public:
  /// A backend on a device; an error when there is none.
  static llvm::Expected<std::unique_ptr<CudaBackend>>
  create(const CudaBackendOptions &Options);
  ~CudaBackend() override;

  llvm::StringRef getName() const override { return "cuda"; }
  llvm::Expected<Tensor> allocate(ElementType Elem,
                                  llvm::ArrayRef<int64_t> Shape) override;
  void deallocate(const Tensor &T) override;
  llvm::Error copyFromHost(const Tensor &Dst,
                           llvm::ArrayRef<uint8_t> Bytes) override;
  llvm::Error copyToHost(const Tensor &Src,
                         llvm::MutableArrayRef<uint8_t> Bytes) override;
  /// On the copy stream, through a ring of pinned slots: the upload runs
  /// alongside the kernels queued after it; a kernel that reads Dst waits
  /// for it (CudaStreams).
  llvm::Error copyFromHostAhead(const Tensor &Dst,
                                llvm::ArrayRef<uint8_t> Bytes) override;
  llvm::Error runNode(const Node &N, llvm::ArrayRef<Tensor> Inputs,
                      llvm::ArrayRef<Tensor> Outputs) override;
  Communicator &getCommunicator() override;
  Communicator::Duration getCommTimeout() const override;

  /// Waits for every queued kernel and transfer; reports what failed.
  llvm::Error synchronize();

  /// "NVIDIA H200 (sm_90, 139 GiB), CUDA runtime 13.0, NCCL 2.28.9".
  std::string describeDevice() const;

  struct Stats {
    uint64_t DeviceNodes = 0, HostPathNodes = 0, HostPathCached = 0;
    /// Waits for device data the host needed (integer operands).
    uint64_t HostReads = 0;
    uint64_t PeakBytesInUse = 0, PeakBytesReserved = 0;
  };
  Stats getStats() const;

  struct Impl;

private:
  explicit CudaBackend(std::unique_ptr<Impl> P);
  std::unique_ptr<Impl> P;
};

} // namespace autopar

#endif // AUTOPAR_RUNTIME_CUDA_CUDABACKEND_H
