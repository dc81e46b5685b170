//===- CudaAllocator.cpp - A caching allocator of device memory -----------===//

#include "runtime/cuda/CudaAllocator.h"

#include "llvm/ADT/Twine.h"

#include <algorithm>

using namespace autopar;
using namespace llvm;

size_t CudaAllocator::roundSize(size_t Bytes) {
  constexpr size_t Small = 512, Large = size_t(2) << 20,
                   Split = size_t(1) << 20;
  Bytes = std::max<size_t>(Bytes, 1);
  size_t Unit = Bytes <= Split ? Small : Large;
  return (Bytes + Unit - 1) / Unit * Unit;
}

CudaAllocator::~CudaAllocator() {
  // The device may still run work that uses the blocks.
  cudaDeviceSynchronize();
  Deferred.clear();
  for (auto &Entry : Sizes)
    cudaFree(Entry.first);
}

void CudaAllocator::reclaim(bool Wait) {
  auto Done = [&](std::pair<void *, EventRef> &D) {
    if (Wait)
      cudaEventSynchronize(D.second->get());
    else if (cudaEventQuery(D.second->get()) != cudaSuccess)
      return false;
    FreeBlocks.emplace(Sizes.lookup(D.first), D.first);
    return true;
  };
  Deferred.erase(std::remove_if(Deferred.begin(), Deferred.end(), Done),
                 Deferred.end());
}

Expected<void *> CudaAllocator::allocate(size_t Bytes) {
  size_t Size = roundSize(Bytes);
  if (!Deferred.empty())
    reclaim(/*Wait=*/false);
  auto It = FreeBlocks.lower_bound(Size);
  if (It != FreeBlocks.end() && It->first / 2 <= Size) {
    void *P = It->second;
    FreeBlocks.erase(It);
    S.InUse += Sizes.lookup(P);
    S.PeakInUse = std::max(S.PeakInUse, S.InUse);
    ++S.CacheHits;
    return P;
  }
  void *P = nullptr;
  cudaError_t E = cudaMalloc(&P, Size);
  if (E == cudaErrorMemoryAllocation) {
    cudaGetLastError(); // Clear the sticky-free error before retrying.
    reclaim(/*Wait=*/true);
    releaseCached();
    E = cudaMalloc(&P, Size);
  }
  if (E != cudaSuccess) {
    cudaGetLastError();
    return createStringError(inconvertibleErrorCode(),
                             "cannot allocate " + Twine(Size) +
                                 " bytes of device memory (" + Twine(S.InUse) +
                                 " bytes in use, " + Twine(S.Reserved) +
                                 " reserved): " + cudaGetErrorString(E));
  }
  Sizes[P] = Size;
  ++S.Mallocs;
  S.Reserved += Size;
  S.PeakReserved = std::max(S.PeakReserved, S.Reserved);
  S.InUse += Size;
  S.PeakInUse = std::max(S.PeakInUse, S.InUse);
  return P;
}

void CudaAllocator::free(void *P) {
  auto It = Sizes.find(P);
  if (It == Sizes.end())
    return;
  S.InUse -= It->second;
  FreeBlocks.emplace(It->second, P);
}

void CudaAllocator::freeAfter(void *P, EventRef Done) {
  auto It = Sizes.find(P);
  if (It == Sizes.end())
    return;
  S.InUse -= It->second;
  Deferred.emplace_back(P, std::move(Done));
}

void CudaAllocator::releaseCached() {
  cudaDeviceSynchronize();
  for (auto &[Size, P] : FreeBlocks) {
    cudaFree(P);
    Sizes.erase(P);
    S.Reserved -= Size;
  }
  FreeBlocks.clear();
}
