//===- CudaAllocator.h - A caching allocator of device memory ---*- C++ -*-===//
//
// Device memory from cudaMalloc (never managed memory), cached: a freed
// block goes back to a free list by size and serves a later request of up
// to its size (and at least half of it). Requests round up to 512 bytes, and
// above 1 MiB to 2 MiB, so that blocks of near sizes are interchangeable.
//
// The cache is stream-ordered for the compute stream: every kernel runs on
// it, so a block freed after its last kernel was queued can serve the next
// allocation at once (the next kernel to use it runs after). A block that
// another stream (communication) may still use is freed with an event
// recorded on that stream, and is reused only once the event has completed.
//
// When cudaMalloc fails the allocator waits for the deferred blocks,
// returns every cached block to the driver and tries once more.
//
//===----------------------------------------------------------------------===//

#ifndef AUTOPAR_RUNTIME_CUDA_CUDAALLOCATOR_H
#define AUTOPAR_RUNTIME_CUDA_CUDAALLOCATOR_H

#include "llvm/ADT/DenseMap.h"
#include "llvm/Support/Error.h"

#include <cuda_runtime_api.h>

#include <cstdint>
#include <map>
#include <memory>
#include <vector>

namespace autopar {

/// A CUDA event (no timing) shared by whoever must wait for it.
class CudaEvent {
public:
  CudaEvent() { cudaEventCreateWithFlags(&E, cudaEventDisableTiming); }
  ~CudaEvent() { cudaEventDestroy(E); }
  CudaEvent(const CudaEvent &) = delete;
  CudaEvent &operator=(const CudaEvent &) = delete;
  cudaEvent_t get() const { return E; }

private:
  cudaEvent_t E = nullptr;
};
using EventRef = std::shared_ptr<CudaEvent>;

class CudaAllocator {
public:
  CudaAllocator() = default;
  ~CudaAllocator();
  CudaAllocator(const CudaAllocator &) = delete;
  CudaAllocator &operator=(const CudaAllocator &) = delete;

  /// At least Bytes (>= 1) of device memory, 256-byte aligned.
  llvm::Expected<void *> allocate(size_t Bytes);
  /// Returns P to the cache (stream-ordered on the compute stream).
  void free(void *P);
  /// Returns P to the cache once Done has completed.
  void freeAfter(void *P, EventRef Done);
  /// Waits for the device and gives every cached block back to the
  /// driver.
  void releaseCached();

  struct Stats {
    /// Bytes handed out and not freed; the peak of that.
    uint64_t InUse = 0, PeakInUse = 0;
    /// Bytes held from cudaMalloc (in use or cached); the peak of that.
    uint64_t Reserved = 0, PeakReserved = 0;
    uint64_t Mallocs = 0, CacheHits = 0;
  };
  const Stats &getStats() const { return S; }

  /// The rounded size allocate(Bytes) reserves.
  static size_t roundSize(size_t Bytes);

private:
  /// Moves deferred blocks whose event completed to the free lists; with
  /// Wait, waits for all of them.
  void reclaim(bool Wait);

  std::multimap<size_t, void *> FreeBlocks;
  /// The size of every block from cudaMalloc, live or cached.
  llvm::DenseMap<void *, size_t> Sizes;
  std::vector<std::pair<void *, EventRef>> Deferred;
  Stats S;
};

} // namespace autopar

#endif // AUTOPAR_RUNTIME_CUDA_CUDAALLOCATOR_H
