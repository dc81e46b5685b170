//===- StepArena.cpp - Host memory planned from a program's liveness ------===//

#include "runtime/cpu/StepArena.h"

#include "llvm/ADT/STLExtras.h"
#include "llvm/Support/Format.h"
#include "llvm/Support/MathExtras.h"
#include "llvm/Support/raw_ostream.h"

#include <algorithm>
#include <cassert>
#include <new>

// Under AddressSanitizer the arena's bytes that no buffer holds are
// poisoned, and so is each slot's tail past the size asked for: a kernel
// that reads or writes outside its tensors is reported as it would be with
// one heap block per tensor.
#if defined(__SANITIZE_ADDRESS__)
#include <sanitizer/asan_interface.h>
#define POISON(P, N) ASAN_POISON_MEMORY_REGION(P, N)
#define UNPOISON(P, N) ASAN_UNPOISON_MEMORY_REGION(P, N)
#else
#define POISON(P, N) ((void)(P), (void)(N))
#define UNPOISON(P, N) ((void)(P), (void)(N))
#endif

using namespace llvm;

namespace autopar {

namespace {

/// The offset of a buffer that stays on the heap (it outlived its run).
constexpr uint64_t HeapOffset = ~uint64_t(0);
/// A buffer not released yet.
constexpr unsigned NotReleased = ~0u;
/// Runs with more buffers keep the heap: placing n buffers takes O(n^2).
constexpr size_t MaxPlannedBuffers = 1 << 14;

bool livesOverlap(const ArenaBuffer &A, const ArenaBuffer &B) {
  return A.Start < B.End && B.Start < A.End;
}

} // namespace

uint64_t placeBuffers(MutableArrayRef<ArenaBuffer> Buffers, uint64_t Align) {
  std::vector<unsigned> Order(Buffers.size());
  for (unsigned I = 0; I != Order.size(); ++I)
    Order[I] = I;
  // Largest first; then earliest, then as given: the same offsets for the
  // same run.
  llvm::stable_sort(Order, [&](unsigned A, unsigned B) {
    if (Buffers[A].Size != Buffers[B].Size)
      return Buffers[A].Size > Buffers[B].Size;
    return Buffers[A].Start < Buffers[B].Start;
  });
  uint64_t Total = 0;
  std::vector<unsigned> Placed;
  std::vector<std::pair<uint64_t, uint64_t>> Taken;
  for (unsigned I : Order) {
    ArenaBuffer &Buf = Buffers[I];
    Taken.clear();
    for (unsigned J : Placed)
      if (livesOverlap(Buf, Buffers[J]))
        Taken.push_back(
            {Buffers[J].Offset, Buffers[J].Offset + Buffers[J].Size});
    llvm::sort(Taken);
    // The lowest aligned offset below, between or above the buffers that
    // live at the same time.
    uint64_t Offset = 0;
    for (auto [From, To] : Taken) {
      if (Offset + Buf.Size <= From)
        break;
      Offset = std::max(Offset, alignTo(To, Align));
    }
    Buf.Offset = Offset;
    Total = std::max(Total, Offset + Buf.Size);
    Placed.push_back(I);
  }
  return Total;
}

StepArena::StepArena() = default;

StepArena::~StepArena() {
  if (Base) {
    UNPOISON(Base, Capacity);
    ::operator delete(Base, std::align_val_t(Alignment));
  }
}

void *StepArena::allocateFromHeap(size_t Size) {
  return ::operator new(Size, std::align_val_t(Alignment), std::nothrow);
}

bool StepArena::inArena(const void *Data) const {
  auto *P = static_cast<const char *>(Data);
  return Base && P >= Base && P < Base + Capacity;
}

bool StepArena::slotIsFree(uint64_t Offset, uint64_t Size) const {
  // Slots in use never overlap each other: only the one that starts at or
  // before Offset and the one after it can overlap the new one.
  auto After = UsedSlots.upper_bound(Offset);
  if (After != UsedSlots.end() && After->first < Offset + Size)
    return false;
  if (After != UsedSlots.begin() && std::prev(After)->second > Offset)
    return false;
  return true;
}

void StepArena::beginRun(const void *RunKey) {
  std::lock_guard<std::mutex> Lock(Mutex);
  if (InRun)
    return;
  InRun = true;
  Key = RunKey;
  auto It = Plans.find(Key);
  Current = It == Plans.end() ? nullptr : It->second.get();
  Event = 0;
  Departed = false;
  Recorded.clear();
  Live.clear();
  LiveBytes = 0;
  HeapInRun = 0;
}

void *StepArena::allocate(size_t Size) {
  uint64_t Rounded = alignTo(std::max<size_t>(Size, 1), Alignment);
  std::lock_guard<std::mutex> Lock(Mutex);
  if (!InRun)
    return allocateFromHeap(Rounded);
  unsigned Index = Recorded.size();
  Recorded.push_back({Rounded, Event++, NotReleased, HeapOffset});
  void *Data = nullptr;
  bool FromArena = false;
  if (Current) {
    if (Index < Current->Buffers.size() &&
        Current->Buffers[Index].Size == Rounded) {
      uint64_t Offset = Current->Buffers[Index].Offset;
      if (Offset != HeapOffset) {
        if (Offset + Rounded <= Capacity && slotIsFree(Offset, Rounded)) {
          UsedSlots[Offset] = Offset + Rounded;
          Data = Base + Offset;
          UNPOISON(Data, std::max<size_t>(Size, 1));
          FromArena = true;
        } else {
          Departed = true;
        }
      }
    } else {
      Departed = true;
    }
  }
  if (!Data) {
    Data = allocateFromHeap(Rounded);
    if (!Data) {
      Recorded.pop_back();
      return nullptr;
    }
    ++HeapInRun;
  }
  Live[Data] = {Index, FromArena};
  LiveBytes += Rounded;
  Totals.PeakLiveBytes = std::max(Totals.PeakLiveBytes, LiveBytes);
  return Data;
}

void StepArena::release(void *Data) {
  std::lock_guard<std::mutex> Lock(Mutex);
  auto It = Live.find(Data);
  if (It != Live.end()) {
    ArenaBuffer &Buf = Recorded[It->second.Index];
    Buf.End = Event++;
    LiveBytes -= Buf.Size;
    bool FromArena = It->second.InArena;
    Live.erase(It);
    if (FromArena) {
      releaseSlot(Data);
      return;
    }
  } else if (inArena(Data)) {
    // From an earlier run.
    releaseSlot(Data);
    return;
  }
  ::operator delete(Data, std::align_val_t(Alignment));
}

void StepArena::releaseSlot(void *Data) {
  auto It = UsedSlots.find(static_cast<char *>(Data) - Base);
  assert(It != UsedSlots.end() && "releasing an arena slot not in use");
  POISON(Base + It->first, It->second - It->first);
  UsedSlots.erase(It);
}

void StepArena::finishPlan() {
  // Buffers still live when the run ends stay on the heap in later runs;
  // one that had a slot of this plan departs from it.
  std::vector<unsigned> Placed;
  for (unsigned I = 0; I != Recorded.size(); ++I) {
    if (Recorded[I].End != NotReleased) {
      Placed.push_back(I);
      continue;
    }
    if (Current && I < Current->Buffers.size() &&
        Current->Buffers[I].Offset != HeapOffset)
      Departed = true;
  }
  if (Current && !Departed)
    return;
  if (Current)
    ++Totals.Replans;
  auto New = std::make_unique<Plan>();
  New->Buffers.assign(Recorded.begin(), Recorded.end());
  for (ArenaBuffer &Buf : New->Buffers)
    Buf.Offset = HeapOffset;
  uint64_t Needed = 0;
  if (Placed.size() <= MaxPlannedBuffers) {
    std::vector<ArenaBuffer> ToPlace;
    for (unsigned I : Placed)
      ToPlace.push_back(Recorded[I]);
    Needed = placeBuffers(ToPlace, Alignment);
    for (unsigned J = 0; J != Placed.size(); ++J)
      New->Buffers[Placed[J]].Offset = ToPlace[J].Offset;
  }
  Plans[Key] = std::move(New);
  // Grow only when no bytes of the arena are in use.
  if (Needed > Capacity && UsedSlots.empty()) {
    if (Base) {
      UNPOISON(Base, Capacity);
      ::operator delete(Base, std::align_val_t(Alignment));
    }
    Base = static_cast<char *>(allocateFromHeap(Needed));
    Capacity = Base ? Needed : 0;
    POISON(Base, Capacity);
  }
}

void StepArena::endRun() {
  std::lock_guard<std::mutex> Lock(Mutex);
  if (!InRun)
    return;
  finishPlan();
  Totals.ArenaBytes = Capacity;
  Totals.Allocations = Recorded.size();
  Totals.HeapAllocations = HeapInRun;
  // What outlives the run is released as from an earlier run.
  Live.clear();
  Recorded.clear();
  InRun = false;
  Current = nullptr;
}

StepArena::Stats StepArena::getStats() const {
  std::lock_guard<std::mutex> Lock(Mutex);
  return Totals;
}

std::string StepArena::describe() const {
  Stats S = getStats();
  std::string Text;
  raw_string_ostream OS(Text);
  OS << "memory: arena " << format("%.1f", S.ArenaBytes / 1048576.0)
     << " MiB planned from the program's liveness (largest held at once "
     << format("%.1f", S.PeakLiveBytes / 1048576.0) << " MiB); last step "
     << S.Allocations << " allocations, " << S.HeapAllocations
     << " from the heap; plans made again: " << S.Replans << "\n";
  return Text;
}

} // namespace autopar
