//===- RuntimeStepArenaTest.cpp - Memory planned from a run's liveness ----===//
//
// placeBuffers' offsets, and StepArena's runs: the first from the heap,
// later ones from the arena with no two live buffers sharing a byte, a run
// that departs from its plan (heap for what does not fit, a new plan), and
// a buffer that outlives its run keeping its bytes.
//
//===----------------------------------------------------------------------===//

#include "runtime/cpu/StepArena.h"

#include "gtest/gtest.h"

#include <cstring>
#include <map>
#include <vector>

using namespace autopar;

namespace {

TEST(PlaceBuffersTest, OverlappingLifetimesNeverShareBytes) {
  // A lives [0, 4), B [1, 2), C [3, 6), D [5, 7): B and C both fit where
  // A's bytes are not, and D reuses B's bytes.
  std::vector<ArenaBuffer> Buffers{
      {256, 0, 4, 0}, {128, 1, 2, 0}, {192, 3, 6, 0}, {128, 5, 7, 0}};
  uint64_t Size = placeBuffers(Buffers, 64);
  for (size_t I = 0; I != Buffers.size(); ++I)
    for (size_t J = I + 1; J != Buffers.size(); ++J) {
      const ArenaBuffer &A = Buffers[I], &B = Buffers[J];
      bool Live = A.Start < B.End && B.Start < A.End;
      bool Bytes = A.Offset < B.Offset + B.Size && B.Offset < A.Offset + A.Size;
      EXPECT_FALSE(Live && Bytes) << I << " and " << J;
    }
  for (const ArenaBuffer &B : Buffers)
    EXPECT_EQ(B.Offset % 64, 0u);
  // At most 448 bytes are live at once (A and C); the plan needs no more.
  EXPECT_EQ(Size, 448u);
  EXPECT_EQ(Buffers[0].Offset, 0u);
  EXPECT_EQ(Buffers[2].Offset, 256u);
}

/// One step's allocations and releases: sizes, then the order of releases
/// (indices into the allocations, released after all are made when
/// ReleaseEarly is false).
struct FakeStep {
  std::vector<size_t> Sizes;
  /// Allocation I is released right after allocation ReleaseAfter[I] (or
  /// at the end when it is -1).
  std::vector<int> ReleaseAfter;
};

/// Runs Step on Arena, filling each buffer with its own byte and checking
/// it is intact when released. Buffer Keep (when >= 0) is not released:
/// it is returned.
void *runStep(StepArena &Arena, const FakeStep &Step, const void *Key,
              int Keep = -1) {
  Arena.beginRun(Key);
  std::vector<void *> Data(Step.Sizes.size());
  std::map<int, std::vector<int>> ReleasesAfter;
  for (size_t I = 0; I != Step.Sizes.size(); ++I)
    ReleasesAfter[Step.ReleaseAfter[I]].push_back(int(I));
  auto Release = [&](int I) {
    if (I == Keep)
      return;
    const unsigned char *P = static_cast<const unsigned char *>(Data[I]);
    for (size_t B = 0; B != Step.Sizes[I]; ++B)
      EXPECT_EQ(P[B], (unsigned char)(I + 1)) << "buffer " << I;
    Arena.release(Data[I]);
  };
  for (size_t I = 0; I != Step.Sizes.size(); ++I) {
    Data[I] = Arena.allocate(Step.Sizes[I]);
    EXPECT_EQ(reinterpret_cast<uintptr_t>(Data[I]) % 64, 0u);
    std::memset(Data[I], int(I + 1), Step.Sizes[I]);
    for (int R : ReleasesAfter[int(I)])
      Release(R);
  }
  for (int R : ReleasesAfter[-1])
    Release(R);
  Arena.endRun();
  return Keep >= 0 ? Data[Keep] : nullptr;
}

FakeStep makeStep() {
  // A chain of activations, each released two allocations later, and a
  // few that live to the end.
  FakeStep S;
  for (int I = 0; I != 40; ++I) {
    S.Sizes.push_back(size_t(1000 + 37 * (I % 7)));
    S.ReleaseAfter.push_back(I % 9 == 0 || I + 2 >= 40 ? -1 : I + 2);
  }
  return S;
}

TEST(StepArenaTest, LaterRunsComeFromThePlannedArena) {
  StepArena Arena;
  FakeStep Step = makeStep();
  int Key;
  runStep(Arena, Step, &Key);
  StepArena::Stats First = Arena.getStats();
  EXPECT_EQ(First.Allocations, 40u);
  EXPECT_EQ(First.HeapAllocations, 40u);
  EXPECT_GT(First.ArenaBytes, 0u);
  // Buffers share bytes: the arena holds at least what was live at once,
  // and far less than all the buffers.
  uint64_t Sum = 0;
  for (size_t Size : Step.Sizes)
    Sum += (Size + 63) / 64 * 64;
  EXPECT_GE(First.ArenaBytes, First.PeakLiveBytes);
  EXPECT_LT(First.ArenaBytes, Sum / 3);
  for (int Run = 0; Run != 3; ++Run) {
    runStep(Arena, Step, &Key);
    StepArena::Stats S = Arena.getStats();
    EXPECT_EQ(S.HeapAllocations, 0u);
    EXPECT_EQ(S.Replans, 0u);
  }
}

TEST(StepArenaTest, ARunThatDepartsTakesTheHeapAndPlansAgain) {
  StepArena Arena;
  FakeStep Step = makeStep();
  int Key;
  runStep(Arena, Step, &Key);
  runStep(Arena, Step, &Key);
  // The same sizes, released later: the plan's offsets would put buffers
  // on bytes still in use, which must come from the heap instead (runStep
  // checks every buffer's bytes).
  FakeStep Later = Step;
  for (int &After : Later.ReleaseAfter)
    After = After < 0 ? -1 : std::min(After + 6, 39);
  runStep(Arena, Later, &Key);
  StepArena::Stats S = Arena.getStats();
  EXPECT_GT(S.HeapAllocations, 0u);
  EXPECT_EQ(S.Replans, 1u);
  // The new plan holds when that run repeats.
  runStep(Arena, Later, &Key);
  EXPECT_EQ(Arena.getStats().HeapAllocations, 0u);
  // Other sizes depart too.
  FakeStep Larger = Later;
  for (size_t &Size : Larger.Sizes)
    Size += 4096;
  runStep(Arena, Larger, &Key);
  EXPECT_EQ(Arena.getStats().Replans, 2u);
}

TEST(StepArenaTest, ABufferThatOutlivesItsRunKeepsItsBytes) {
  StepArena Arena;
  FakeStep Step = makeStep();
  int Key;
  runStep(Arena, Step, &Key);
  runStep(Arena, Step, &Key);
  // A run whose largest buffer is kept after it ends (a caller's output),
  // then runs of the plan made from it, whose buffers may take those bytes
  // only once they are released.
  void *Kept = runStep(Arena, Step, &Key, /*Keep=*/6);
  std::memset(Kept, 0x5a, Step.Sizes[6]);
  runStep(Arena, Step, &Key);
  runStep(Arena, Step, &Key);
  const unsigned char *P = static_cast<const unsigned char *>(Kept);
  for (size_t B = 0; B != Step.Sizes[6]; ++B)
    ASSERT_EQ(P[B], 0x5a);
  Arena.release(Kept);
  runStep(Arena, Step, &Key);
  // Outside a run: the heap.
  void *Outside = Arena.allocate(100);
  ASSERT_NE(Outside, nullptr);
  Arena.release(Outside);
}

#if defined(__SANITIZE_ADDRESS__)
// Under AddressSanitizer, arena bytes that no buffer holds are poisoned:
// a write past a buffer planned in the arena is reported, as past a heap
// block.
TEST(StepArenaDeathTest, WritesPastABufferAreReported) {
  StepArena Arena;
  FakeStep Step = makeStep();
  int Key;
  runStep(Arena, Step, &Key);
  runStep(Arena, Step, &Key);
  ASSERT_EQ(Arena.getStats().HeapAllocations, 0u);
  Arena.beginRun(&Key);
  char *Data = static_cast<char *>(Arena.allocate(Step.Sizes[0]));
  EXPECT_DEATH(Data[Step.Sizes[0]] = 1, "AddressSanitizer");
  Arena.release(Data);
  Arena.endRun();
}
#endif

} // namespace
