//===- KernelThreads.cpp - The threads of parallelFor ---------------------===//
//
// parallelFor's threads start once, on the first call that needs them, and
// wait between calls (a condition variable), instead of starting and
// joining threads on every call (tens of microseconds each, on kernels
// that take a few hundred). A call made from inside a parallelFor body
// runs on its caller's thread alone.
//
//===----------------------------------------------------------------------===//

#include "runtime/cpu/Kernels.h"

#include <algorithm>
#include <condition_variable>
#include <mutex>
#include <thread>
#include <vector>

using namespace autopar;
using namespace llvm;

namespace {

/// Whether this thread is running a parallelFor body.
thread_local bool InParallelFor = false;

/// Workers 1, 2, ... of parallelFor (the caller is 0).
class KernelPool {
public:
  ~KernelPool() {
    {
      std::lock_guard<std::mutex> Lock(M);
      Stopping = true;
    }
    Wake.notify_all();
    for (std::thread &W : Workers)
      W.join();
  }

  /// Runs Range(T) for T in [0, Threads): 0 on the caller, the others on
  /// the workers; returns when all are done.
  void run(int64_t Threads, function_ref<void(int64_t)> Range) {
    {
      std::lock_guard<std::mutex> Lock(M);
      while (int64_t(Workers.size()) < Threads - 1) {
        int64_t T = int64_t(Workers.size()) + 1;
        Workers.emplace_back([this, T] { work(T); });
      }
      Job = Range;
      JobThreads = Threads;
      Pending = Threads - 1;
      ++Generation;
    }
    Wake.notify_all();
    Range(0);
    std::unique_lock<std::mutex> Lock(M);
    Done.wait(Lock, [this] { return Pending == 0; });
  }

private:
  void work(int64_t T) {
    InParallelFor = true;
    uint64_t Seen = 0;
    std::unique_lock<std::mutex> Lock(M);
    for (;;) {
      Wake.wait(Lock, [&] { return Stopping || Generation != Seen; });
      if (Stopping)
        return;
      Seen = Generation;
      if (T >= JobThreads)
        continue;
      function_ref<void(int64_t)> Range = Job;
      Lock.unlock();
      Range(T);
      Lock.lock();
      if (--Pending == 0)
        Done.notify_one();
    }
  }

  std::mutex M;
  std::condition_variable Wake, Done;
  std::vector<std::thread> Workers;
  function_ref<void(int64_t)> Job;
  int64_t JobThreads = 0, Pending = 0;
  uint64_t Generation = 0;
  bool Stopping = false;
};

int KernelThreads = 1;

} // namespace

void autopar::setKernelThreads(int Threads) {
  KernelThreads = std::max(Threads, 1);
}

void autopar::parallelForChunks(int64_t N,
                                function_ref<void(int64_t, int64_t)> Body) {
  parallelFor((N + ElementsPerChunk - 1) / ElementsPerChunk, [&](int64_t C) {
    int64_t Begin = C * ElementsPerChunk;
    Body(Begin, std::min(N, Begin + ElementsPerChunk));
  });
}

void autopar::parallelFor(int64_t N, function_ref<void(int64_t)> Body) {
  int64_t Threads = InParallelFor ? 1 : std::min<int64_t>(KernelThreads, N);
  if (Threads <= 1) {
    for (int64_t I = 0; I != N; ++I)
      Body(I);
    return;
  }
  static KernelPool Pool;
  InParallelFor = true;
  Pool.run(Threads, [&](int64_t T) {
    for (int64_t I = N * T / Threads, E = N * (T + 1) / Threads; I != E; ++I)
      Body(I);
  });
  InParallelFor = false;
}
