//===- CudaStreams.h - Ordering work across CUDA streams --------*- C++ -*-===//
//
// Kernels run on one compute stream; each NCCL communicator has its own
// stream, so communication overlaps the kernels that do not need it. The
// tracker keeps the order that matters, per buffer:
//   - before a side (communication) stream touches buffers, it waits for
//     the compute stream's queued work, and for other side streams' work
//     on those buffers (prepareSide);
//   - after it queued that work, an event marks when the buffers it wrote
//     are ready and when those it read or wrote are free (noteSideWork);
//   - the compute stream waits for those events only when a kernel reads a
//     buffer a side stream wrote, or writes one a side stream still uses
//     (beforeCompute);
//   - a freed buffer that a side stream may still use goes back to the
//     allocator only once its event has completed (release).
//
// Waits on the host poll, so that a fault the communicator's watchdog
// reports (setFault) ends them with an error instead of a hang.
//
//===----------------------------------------------------------------------===//

#ifndef AUTOPAR_RUNTIME_CUDA_CUDASTREAMS_H
#define AUTOPAR_RUNTIME_CUDA_CUDASTREAMS_H

#include "runtime/cuda/CudaAllocator.h"

#include "llvm/ADT/ArrayRef.h"
#include "llvm/ADT/DenseMap.h"
#include "llvm/Support/Error.h"

#include <cuda_runtime_api.h>

#include <mutex>
#include <optional>
#include <string>

namespace autopar {

class CudaStreams {
public:
  CudaStreams(cudaStream_t Compute, CudaAllocator &Alloc)
      : Compute(Compute), Alloc(Alloc) {}

  cudaStream_t getCompute() const { return Compute; }
  CudaAllocator &getAllocator() { return Alloc; }

  /// Makes Side wait for the compute stream's queued work and for other
  /// side streams' pending work on Buffers.
  llvm::Error prepareSide(cudaStream_t Side, llvm::ArrayRef<void *> Buffers);
  /// Records that Side has queued work reading Reads and writing Writes;
  /// returns the event that marks its end.
  llvm::Expected<EventRef> noteSideWork(cudaStream_t Side,
                                        llvm::ArrayRef<void *> Reads,
                                        llvm::ArrayRef<void *> Writes);
  /// Makes the compute stream wait for side work that wrote Reads, or
  /// that reads or writes Writes.
  llvm::Error beforeCompute(llvm::ArrayRef<void *> Reads,
                            llvm::ArrayRef<void *> Writes);
  /// Frees P through the allocator, after pending side work on it.
  void release(void *P);

  /// Waits on the host for Event, polling; an error for a CUDA failure or
  /// a fault.
  llvm::Error wait(cudaEvent_t Event, llvm::StringRef What);
  /// Waits for everything queued on every stream that the tracker knows.
  llvm::Error synchronize();

  /// Reports a fault (a timed-out or failed collective); every wait after
  /// it fails with Message. Thread-safe.
  void setFault(std::string Message);
  std::optional<std::string> getFault() const;

private:
  cudaStream_t Compute;
  CudaAllocator &Alloc;
  /// Buffers a side stream writes: the event after which they are ready.
  llvm::DenseMap<void *, EventRef> ReadyAfter;
  /// Buffers a side stream reads or writes: the event after which it no
  /// longer does.
  llvm::DenseMap<void *, EventRef> UsedUntil;
  /// The side streams seen, for synchronize.
  llvm::SmallVector<cudaStream_t, 4> Sides;
  mutable std::mutex FaultMutex;
  std::optional<std::string> Fault;
};

} // namespace autopar

#endif // AUTOPAR_RUNTIME_CUDA_CUDASTREAMS_H
