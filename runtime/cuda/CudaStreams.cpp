//===- CudaStreams.cpp - Ordering work across CUDA streams ----------------===//

#include "runtime/cuda/CudaStreams.h"

#include "llvm/ADT/STLExtras.h"
#include "llvm/ADT/Twine.h"

#include <chrono>
#include <thread>

using namespace autopar;
using namespace llvm;

static Error cudaError(cudaError_t E, const Twine &What) {
  return createStringError(inconvertibleErrorCode(),
                           What + ": " + cudaGetErrorString(E));
}

Error CudaStreams::prepareSide(cudaStream_t Side, ArrayRef<void *> Buffers) {
  if (!llvm::is_contained(Sides, Side))
    Sides.push_back(Side);
  CudaEvent Queued;
  if (cudaError_t E = cudaEventRecord(Queued.get(), Compute))
    return cudaError(E, "cudaEventRecord");
  if (cudaError_t E = cudaStreamWaitEvent(Side, Queued.get(), 0))
    return cudaError(E, "cudaStreamWaitEvent");
  for (void *P : Buffers)
    for (auto *Map : {&ReadyAfter, &UsedUntil}) {
      auto It = Map->find(P);
      if (It != Map->end())
        if (cudaError_t E = cudaStreamWaitEvent(Side, It->second->get(), 0))
          return cudaError(E, "cudaStreamWaitEvent");
    }
  return Error::success();
}

Expected<EventRef> CudaStreams::noteSideWork(cudaStream_t Side,
                                             ArrayRef<void *> Reads,
                                             ArrayRef<void *> Writes) {
  auto Done = std::make_shared<CudaEvent>();
  if (cudaError_t E = cudaEventRecord(Done->get(), Side))
    return cudaError(E, "cudaEventRecord");
  for (void *P : Writes) {
    ReadyAfter[P] = Done;
    UsedUntil[P] = Done;
  }
  for (void *P : Reads)
    UsedUntil[P] = Done;
  return Done;
}

Error CudaStreams::beforeCompute(ArrayRef<void *> Reads,
                                 ArrayRef<void *> Writes) {
  if (ReadyAfter.empty() && UsedUntil.empty())
    return Error::success();
  auto WaitFor = [&](DenseMap<void *, EventRef> &Map, void *P) -> Error {
    auto It = Map.find(P);
    if (It == Map.end())
      return Error::success();
    EventRef Event = It->second;
    Map.erase(It);
    if (cudaError_t E = cudaStreamWaitEvent(Compute, Event->get(), 0))
      return cudaError(E, "cudaStreamWaitEvent");
    return Error::success();
  };
  for (void *P : Reads)
    if (Error E = WaitFor(ReadyAfter, P))
      return E;
  for (void *P : Writes) {
    if (Error E = WaitFor(ReadyAfter, P))
      return E;
    if (Error E = WaitFor(UsedUntil, P))
      return E;
  }
  return Error::success();
}

void CudaStreams::release(void *P) {
  ReadyAfter.erase(P);
  auto It = UsedUntil.find(P);
  if (It == UsedUntil.end()) {
    Alloc.free(P);
    return;
  }
  EventRef Event = It->second;
  UsedUntil.erase(It);
  Alloc.freeAfter(P, std::move(Event));
}

Error CudaStreams::wait(cudaEvent_t Event, StringRef What) {
  auto Start = std::chrono::steady_clock::now();
  while (true) {
    cudaError_t E = cudaEventQuery(Event);
    if (E == cudaSuccess)
      return Error::success();
    if (E != cudaErrorNotReady)
      return cudaError(E, "CUDA error while " + What);
    if (std::optional<std::string> F = getFault())
      return createStringError(inconvertibleErrorCode(), *F);
    // Spin for the first millisecond (short waits), then sleep a little.
    if (std::chrono::steady_clock::now() - Start > std::chrono::milliseconds(1))
      std::this_thread::sleep_for(std::chrono::microseconds(50));
    else
      std::this_thread::yield();
  }
}

Error CudaStreams::synchronize() {
  for (cudaStream_t S : Sides) {
    CudaEvent Done;
    if (cudaError_t E = cudaEventRecord(Done.get(), S))
      return cudaError(E, "cudaEventRecord");
    if (Error E = wait(Done.get(), "waiting for communication"))
      return E;
  }
  CudaEvent Done;
  if (cudaError_t E = cudaEventRecord(Done.get(), Compute))
    return cudaError(E, "cudaEventRecord");
  return wait(Done.get(), "waiting for the queued kernels");
}

void CudaStreams::setFault(std::string Message) {
  std::lock_guard<std::mutex> Lock(FaultMutex);
  if (!Fault)
    Fault = std::move(Message);
}

std::optional<std::string> CudaStreams::getFault() const {
  std::lock_guard<std::mutex> Lock(FaultMutex);
  return Fault;
}
