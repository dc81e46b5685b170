//===- StepArena.h - Host memory planned from liveness ----------*- C++ -*-===//
//
// Every run of a program allocates and frees the same buffers in the same
// order: the executor's schedule is fixed (Executor.h). So the CPU backend
// plans its memory from a run instead of asking the heap for every tensor
// of every step. The first run of a program takes its buffers from the heap
// while the arena records each one's size and lifetime (from its allocation
// to its release, counted in allocation and release events). At the end of
// that run every buffer gets an offset in one arena such that two buffers
// whose lifetimes overlap never share a byte: largest first, each at the
// lowest offset that is free for its whole lifetime (the greedy heap
// simulation of XLA's buffer assignment). Later runs take their k-th
// allocation at the k-th offset: no allocator call, no page fault, no zero
// fill by the kernel.
//
// Nothing assumes the runs really repeat. An allocation whose size differs
// from the plan's, or whose bytes would overlap a buffer still in use, comes
// from the heap, and the plan is made again from that run. Buffers released
// after their run (outputs kept by a caller) keep their bytes: the overlap
// check covers them in the next run too. The arena is shared by the
// programs a backend runs (their runs never overlap) and is as large as the
// largest plan; it grows only when none of its bytes are in use.
//
// Allocations outside a run (parameters, optimizer states) always come from
// the heap. Thread-safe; 64-byte aligned. Under AddressSanitizer the bytes
// no buffer holds are poisoned (StepArena.cpp).
//
//===----------------------------------------------------------------------===//

#ifndef AUTOPAR_RUNTIME_CPU_STEPARENA_H
#define AUTOPAR_RUNTIME_CPU_STEPARENA_H

#include "llvm/ADT/ArrayRef.h"
#include "llvm/ADT/DenseMap.h"

#include <cstddef>
#include <cstdint>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

namespace autopar {

/// A buffer of a run: its size, its lifetime [Start, End) in events, and
/// the offset placeBuffers gives it.
struct ArenaBuffer {
  uint64_t Size = 0;
  unsigned Start = 0, End = 0;
  uint64_t Offset = 0;
};

/// Gives each buffer an offset (multiples of Align) so that buffers whose
/// lifetimes overlap do not overlap in bytes; returns the arena size they
/// need. Deterministic: the order of Buffers decides ties.
uint64_t placeBuffers(llvm::MutableArrayRef<ArenaBuffer> Buffers,
                      uint64_t Align);

class StepArena {
public:
  static constexpr size_t Alignment = 64;

  StepArena();
  ~StepArena();
  StepArena(const StepArena &) = delete;
  StepArena &operator=(const StepArena &) = delete;

  /// Brackets a run of the program Key (runs do not nest; a nested begin
  /// is ignored, as is its end).
  void beginRun(const void *Key);
  void endRun();

  /// Size bytes (at least 1), 64-byte aligned, uninitialised; null when
  /// the heap is out of memory.
  void *allocate(size_t Size);
  /// Releases memory from allocate.
  void release(void *Data);

  struct Stats {
    /// The arena's bytes, and the largest bytes a run held at once.
    uint64_t ArenaBytes = 0, PeakLiveBytes = 0;
    /// Of the last finished run: its allocations, and those that came
    /// from the heap.
    unsigned Allocations = 0, HeapAllocations = 0;
    /// Runs whose allocations departed from their program's plan.
    unsigned Replans = 0;
  };
  Stats getStats() const;
  /// One line for autopar-run --profile.
  std::string describe() const;

private:
  /// A program's buffers in allocation order, with their offsets.
  struct Plan {
    std::vector<ArenaBuffer> Buffers;
  };
  /// A live allocation of the current run: its index in Recorded.
  struct LiveEntry {
    unsigned Index;
    bool InArena;
  };

  void *allocateFromHeap(size_t Size);
  bool inArena(const void *Data) const;
  /// True when [Offset, Offset + Size) overlaps no arena slot in use.
  bool slotIsFree(uint64_t Offset, uint64_t Size) const;
  /// Frees the slot at Data (poisoned again under AddressSanitizer).
  void releaseSlot(void *Data);
  void finishPlan();

  mutable std::mutex Mutex;
  llvm::DenseMap<const void *, std::unique_ptr<Plan>> Plans;
  char *Base = nullptr;
  uint64_t Capacity = 0;
  /// Arena slots in use: offset to end.
  std::map<uint64_t, uint64_t> UsedSlots;

  // The run under way.
  bool InRun = false;
  const void *Key = nullptr;
  Plan *Current = nullptr;
  unsigned Event = 0;
  bool Departed = false;
  std::vector<ArenaBuffer> Recorded;
  llvm::DenseMap<const void *, LiveEntry> Live;
  uint64_t LiveBytes = 0;
  unsigned HeapInRun = 0;

  Stats Totals;
};

} // namespace autopar

#endif // AUTOPAR_RUNTIME_CPU_STEPARENA_H
