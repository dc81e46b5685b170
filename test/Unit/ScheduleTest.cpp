//===- ScheduleTest.cpp - Pipeline-schedule simulation --------------------===//
//
// The closed forms these tests check are the textbook ones for balanced
// stages (Narayanan et al. 2021, "Efficient Large-Scale Language Model
// Training on GPU Clusters Using Megatron-LM", sections 2.2.1-2.2.2); the
// simulation must reproduce them exactly there, and goes beyond them
// (latency, unbalanced stages) where they do not apply.
//
//===----------------------------------------------------------------------===//

#include "planner/Schedule.h"

#include "gtest/gtest.h"

#include <cmath>
#include <string>
#include <vector>

using namespace autopar;

namespace {

/// p ranks of v chunks each; a micro-batch's forward through one rank
/// (all its chunks) takes F seconds and its backward B, split evenly over
/// the chunks.
PipelineSpec uniform(ScheduleKind K, unsigned P, unsigned V, unsigned M,
                     double F, double B, double P2P = 0) {
  PipelineSpec S;
  S.Kind = K;
  S.Stages = P;
  S.VirtualStages = V;
  S.MicroBatches = M;
  S.Forward.assign(P * V, F / V);
  S.Backward.assign(P * V, B / V);
  S.P2PSeconds = P2P;
  return S;
}

PipelineResult simulate(const PipelineSpec &S) {
  llvm::Expected<PipelineResult> R = simulatePipeline(S);
  if (!R) {
    ADD_FAILURE() << llvm::toString(R.takeError());
    return {};
  }
  return std::move(*R);
}

/// The message simulatePipeline fails with, or "" when it succeeds.
std::string errorOf(const PipelineSpec &S) {
  llvm::Expected<PipelineResult> R = simulatePipeline(S);
  if (R)
    return "";
  return llvm::toString(R.takeError());
}

std::string errorOf(const PipelineSpec &S,
                    const std::vector<PipelineAction> &Order) {
  llvm::Expected<PipelineResult> R = simulatePipelineOrder(S, Order);
  if (R)
    return "";
  return llvm::toString(R.takeError());
}

std::vector<PipelineAction> orderOf(const PipelineSpec &S) {
  llvm::Expected<std::vector<PipelineAction>> Order = getScheduleOrder(S);
  if (!Order) {
    ADD_FAILURE() << llvm::toString(Order.takeError());
    return {};
  }
  return std::move(*Order);
}

using Actions = std::vector<std::string>;

std::vector<Actions> actionsOf(const PipelineSpec &S) {
  llvm::Expected<std::vector<Actions>> A = getScheduleActions(S);
  if (!A) {
    ADD_FAILURE() << llvm::toString(A.takeError());
    return {};
  }
  return std::move(*A);
}

TEST(ScheduleTest, NamesRoundTrip) {
  for (ScheduleKind K :
       {ScheduleKind::GPipe, ScheduleKind::OneFOneB, ScheduleKind::Interleaved})
    EXPECT_EQ(parseScheduleName(getScheduleName(K)), K);
  EXPECT_EQ(getScheduleName(ScheduleKind::GPipe), "gpipe");
  EXPECT_EQ(getScheduleName(ScheduleKind::OneFOneB), "1f1b");
  EXPECT_EQ(getScheduleName(ScheduleKind::Interleaved), "interleaved");
  EXPECT_EQ(parseScheduleName("1F1B"), std::nullopt);
  EXPECT_EQ(parseScheduleName(""), std::nullopt);
}

// Balanced stages, no latency: both take (m + p - 1)(f + b) and idle a
// fraction (p - 1) / (m + p - 1) of the time (Narayanan et al. 2021, 2.2.1).
TEST(ScheduleTest, GPipeAndOneFOneBMatchTheClosedForm) {
  for (ScheduleKind K : {ScheduleKind::GPipe, ScheduleKind::OneFOneB})
    for (unsigned P : {1, 2, 4, 8})
      for (unsigned M : {1, 3, 8, 16})
        for (double B : {1.0, 2.0}) {
          SCOPED_TRACE(getScheduleName(K).str() + " p=" + std::to_string(P) +
                       " m=" + std::to_string(M) + " b=" + std::to_string(B));
          PipelineResult R = simulate(uniform(K, P, 1, M, 1.0, B));
          EXPECT_DOUBLE_EQ(R.StepSeconds, (M + P - 1) * (1.0 + B));
          EXPECT_DOUBLE_EQ(R.BubbleFraction, double(P - 1) / (M + P - 1));
          ASSERT_EQ(R.BusySeconds.size(), P);
          for (double Busy : R.BusySeconds)
            EXPECT_DOUBLE_EQ(Busy, M * (1.0 + B));
        }
}

// v chunks of f/v and b/v per rank: the step is (m + (p - 1) / v)(f + b)
// and the bubble shrinks by v, to (p - 1) / (v m + p - 1) of the step
// (Narayanan et al. 2021, 2.2.2). Chunks take 1 and b seconds (f = v) so
// that every sum is exact.
TEST(ScheduleTest, InterleavedMatchesTheClosedForm) {
  for (unsigned P : {2, 4, 8})
    for (unsigned V : {2, 3, 4})
      for (unsigned Groups : {1, 2, 4})
        for (double B : {1.0, 2.0}) {
          unsigned M = P * Groups;
          SCOPED_TRACE("p=" + std::to_string(P) + " v=" + std::to_string(V) +
                       " m=" + std::to_string(M) + " b=" + std::to_string(B));
          PipelineResult R = simulate(
              uniform(ScheduleKind::Interleaved, P, V, M, V * 1.0, V * B));
          EXPECT_DOUBLE_EQ(R.StepSeconds,
                           (M + double(P - 1) / V) * V * (1.0 + B));
          EXPECT_DOUBLE_EQ(R.BubbleFraction, double(P - 1) / (V * M + P - 1));
          for (double Busy : R.BusySeconds)
            EXPECT_DOUBLE_EQ(Busy, M * V * (1.0 + B));
        }
}

TEST(ScheduleTest, GPipeHoldsEveryMicroBatch) {
  PipelineResult R = simulate(uniform(ScheduleKind::GPipe, 4, 1, 6, 1, 2));
  EXPECT_EQ(R.PeakInFlight, std::vector<unsigned>(4, 6));
}

// Rank r holds its p - r - 1 warm-up micro-batches plus the one in its
// steady state, never more than there are.
TEST(ScheduleTest, OneFOneBHoldsAtMostStagesMinusRank) {
  for (unsigned M : {1, 2, 3, 4, 16}) {
    SCOPED_TRACE("m=" + std::to_string(M));
    PipelineResult R = simulate(uniform(ScheduleKind::OneFOneB, 4, 1, M, 1, 2));
    ASSERT_EQ(R.PeakInFlight.size(), 4u);
    for (unsigned Rank = 0; Rank != 4; ++Rank)
      EXPECT_EQ(R.PeakInFlight[Rank], std::min(4 - Rank, M)) << Rank;
  }
}

// Megatron's order gives rank r (p - r - 1) * 2 + (v - 1) * p warm-up
// forwards, so rank 0 holds (v + 1) p - 1 chunk activations: p + (p - 1)/v
// micro-batches of the rank's layers, Korthikanti et al. 2022's factor
// 1 + (p - 1) / (p v) over the p that 1F1B's first rank holds. The last rank
// holds (v - 1) p + 1. With m == p every forward runs first.
TEST(ScheduleTest, InterleavedInFlightFollowsMegatronsWarmup) {
  for (unsigned P : {2, 4, 8})
    for (unsigned V : {2, 3}) {
      SCOPED_TRACE("p=" + std::to_string(P) + " v=" + std::to_string(V));
      PipelineResult R =
          simulate(uniform(ScheduleKind::Interleaved, P, V, 4 * P, 1, 2));
      ASSERT_EQ(R.PeakInFlight.size(), P);
      for (unsigned Rank = 0; Rank != P; ++Rank)
        EXPECT_EQ(R.PeakInFlight[Rank], (P - Rank - 1) * 2 + (V - 1) * P + 1);
      EXPECT_EQ(R.PeakInFlight[0], (V + 1) * P - 1);
      EXPECT_GT(R.PeakInFlight[0], V * P);

      R = simulate(uniform(ScheduleKind::Interleaved, P, V, P, 1, 2));
      EXPECT_EQ(R.PeakInFlight, std::vector<unsigned>(P, V * P));
    }
}

// GPipe's forward and backward phases are straight pipelines, so latency
// only lengthens the fill and the drain: 2 (p - 1) sends. With one
// micro-batch every schedule is that one chain.
TEST(ScheduleTest, PointToPointAddsLatency) {
  const double C = 0.25;
  for (unsigned M : {1, 2, 8}) {
    SCOPED_TRACE("m=" + std::to_string(M));
    double Bound = (M + 3) * 3.0 + 2 * 3 * C;
    PipelineResult G = simulate(uniform(ScheduleKind::GPipe, 4, 1, M, 1, 2, C));
    EXPECT_DOUBLE_EQ(G.StepSeconds, Bound);
    PipelineResult O =
        simulate(uniform(ScheduleKind::OneFOneB, 4, 1, M, 1, 2, C));
    if (M == 1) {
      EXPECT_DOUBLE_EQ(O.StepSeconds, Bound);
    }
    // 1F1B's steady state waits for gradients on the way: never shorter.
    EXPECT_GE(O.StepSeconds, Bound);
    // Latency never makes the ranks busier.
    EXPECT_EQ(O.BusySeconds, std::vector<double>(4, M * 3.0));
  }
  PipelineResult O =
      simulate(uniform(ScheduleKind::OneFOneB, 4, 1, 8, 1, 2, C));
  EXPECT_GT(O.StepSeconds, (8 + 3) * 3.0 + 2 * 3 * C);
  for (unsigned M : {4, 8}) {
    PipelineResult Without =
        simulate(uniform(ScheduleKind::Interleaved, 4, 2, M, 1, 2));
    PipelineResult With =
        simulate(uniform(ScheduleKind::Interleaved, 4, 2, M, 1, 2, C));
    // At least one chain through all 2 p = 8 chunks and back.
    EXPECT_GE(With.StepSeconds, Without.StepSeconds + 2 * 7 * C);
    EXPECT_GT(With.BubbleFraction, Without.BubbleFraction);
  }
}

// One stage three times slower than the others: 1F1B keeps it busy from
// the moment its first input arrives to its last gradient, so the step is
// the slow stage's work plus the forwards before it and the backwards
// after it; GPipe cannot do better.
TEST(ScheduleTest, SlowStageDominates) {
  for (ScheduleKind K : {ScheduleKind::GPipe, ScheduleKind::OneFOneB}) {
    PipelineSpec S = uniform(K, 4, 1, 16, 1, 2);
    S.Forward[2] = 3;
    S.Backward[2] = 6;
    PipelineResult R = simulate(S);
    double Floor = (1 + 1) + 16 * (3 + 6) + (2 + 2);
    if (K == ScheduleKind::OneFOneB) {
      EXPECT_DOUBLE_EQ(R.StepSeconds, Floor);
    } else {
      EXPECT_GE(R.StepSeconds, Floor);
    }
    EXPECT_DOUBLE_EQ(R.BusySeconds[2], 16 * 9.0);
    EXPECT_DOUBLE_EQ(R.BusySeconds[0], 16 * 3.0);
    // Three ranks idle about two thirds of the time.
    EXPECT_GT(R.BubbleFraction, 0.5);
  }
}

TEST(ScheduleTest, OneStageIsSequential) {
  for (ScheduleKind K : {ScheduleKind::GPipe, ScheduleKind::OneFOneB}) {
    PipelineResult R = simulate(uniform(K, 1, 1, 5, 1, 2, 0.5));
    EXPECT_DOUBLE_EQ(R.StepSeconds, 5 * 3.0);
    EXPECT_DOUBLE_EQ(R.BubbleFraction, 0);
  }
  // Chunks on the same rank send nothing.
  PipelineResult R =
      simulate(uniform(ScheduleKind::Interleaved, 1, 2, 5, 1, 2, 0.5));
  EXPECT_DOUBLE_EQ(R.StepSeconds, 5 * 3.0);
  EXPECT_EQ(R.PeakInFlight, std::vector<unsigned>{2});
}

TEST(ScheduleTest, ZeroTimesGiveZeroBubble) {
  PipelineResult R = simulate(uniform(ScheduleKind::OneFOneB, 4, 1, 4, 0, 0));
  EXPECT_EQ(R.StepSeconds, 0);
  EXPECT_EQ(R.BubbleFraction, 0);
}

TEST(ScheduleTest, InvalidSpecsAreErrors) {
  EXPECT_NE(errorOf(uniform(ScheduleKind::Interleaved, 4, 2, 6, 1, 2))
                .find("MicroBatches (6) to be a multiple of Stages (4)"),
            std::string::npos);
  EXPECT_NE(errorOf(uniform(ScheduleKind::Interleaved, 4, 1, 8, 1, 2))
                .find("needs VirtualStages >= 2"),
            std::string::npos);
  EXPECT_NE(errorOf(uniform(ScheduleKind::OneFOneB, 4, 2, 8, 1, 2))
                .find("1f1b schedule needs VirtualStages == 1"),
            std::string::npos);
  EXPECT_NE(errorOf(uniform(ScheduleKind::GPipe, 0, 1, 8, 1, 2))
                .find("Stages must be at least 1"),
            std::string::npos);
  EXPECT_NE(errorOf(uniform(ScheduleKind::GPipe, 4, 1, 0, 1, 2))
                .find("MicroBatches must be at least 1"),
            std::string::npos);

  PipelineSpec S = uniform(ScheduleKind::GPipe, 4, 1, 8, 1, 2);
  S.Backward.pop_back();
  EXPECT_NE(errorOf(S).find("Backward has 3 entries, expected 4"),
            std::string::npos);
  S = uniform(ScheduleKind::GPipe, 4, 1, 8, 1, 2);
  S.Forward[1] = -1;
  EXPECT_NE(errorOf(S).find("Forward[1] is not a finite time"),
            std::string::npos);
  S = uniform(ScheduleKind::GPipe, 4, 1, 8, 1, 2, std::nan(""));
  EXPECT_NE(errorOf(S).find("P2PSeconds"), std::string::npos);
  EXPECT_FALSE(bool(getScheduleActions(S)));
}

// Rank 0 warms up with min(p - 0 - 1, m) = 1 forward, runs F1 B0 in its
// steady state and drains B1; the last rank alternates from the start.
TEST(ScheduleTest, OneFOneBActions) {
  std::vector<Actions> A =
      actionsOf(uniform(ScheduleKind::OneFOneB, 2, 1, 2, 1, 2));
  ASSERT_EQ(A.size(), 2u);
  EXPECT_EQ(A[0], (Actions{"0F0", "0F1", "0B0", "0B1"}));
  EXPECT_EQ(A[1], (Actions{"1F0", "1B0", "1F1", "1B1"}));

  A = actionsOf(uniform(ScheduleKind::GPipe, 2, 1, 2, 1, 2));
  EXPECT_EQ(A[0], (Actions{"0F0", "0F1", "0B0", "0B1"}));
  EXPECT_EQ(A[1], (Actions{"1F0", "1F1", "1B0", "1B1"}));
}

// p = 2, v = 2, m = 4: virtual stages 0 and 2 on rank 0, 1 and 3 on rank
// 1. Rank 0 warms up with (2 - 0 - 1) * 2 + (2 - 1) * 2 = 4 forwards
// (chunk 0 then chunk 1 of the first group of p micro-batches), rank 1
// with 2; backwards go through the chunks last to first.
TEST(ScheduleTest, InterleavedActionsFollowMegatron) {
  std::vector<Actions> A =
      actionsOf(uniform(ScheduleKind::Interleaved, 2, 2, 4, 1, 2));
  ASSERT_EQ(A.size(), 2u);
  EXPECT_EQ(A[0], (Actions{"0F0", "0F1", "2F0", "2F1", // warm-up
                           "0F2", "2B0", "0F3", "2B1", "2F2", "0B0", "2F3",
                           "0B1",                         // steady
                           "2B2", "2B3", "0B2", "0B3"})); // drain
  EXPECT_EQ(A[1], (Actions{"1F0", "1F1",                  // warm-up
                           "3F0", "3B0", "3F1", "3B1", "1F2", "1B0", "1F3",
                           "1B1", "3F2", "3B2", "3F3", "3B3", // steady
                           "1B2", "1B3"}));                   // drain
}

// Every order the library builds runs to the end, whatever the sizes.
TEST(ScheduleTest, BuiltOrdersNeverDeadlock) {
  for (unsigned P = 1; P <= 9; ++P)
    for (unsigned M = 1; M <= 20; ++M) {
      SCOPED_TRACE("p=" + std::to_string(P) + " m=" + std::to_string(M));
      simulate(uniform(ScheduleKind::GPipe, P, 1, M, 1, 2, 0.1));
      simulate(uniform(ScheduleKind::OneFOneB, P, 1, M, 1, 2, 0.1));
      if (M % P == 0)
        for (unsigned V = 2; V <= 4; ++V)
          simulate(uniform(ScheduleKind::Interleaved, P, V, M, 1, 2, 0.1));
    }
}

TEST(ScheduleTest, DeadlockIsAnError) {
  PipelineSpec S = uniform(ScheduleKind::OneFOneB, 2, 1, 2, 1, 2);
  std::vector<PipelineAction> Order = orderOf(S);
  ASSERT_EQ(Order.size(), 8u);
  EXPECT_EQ(errorOf(S, Order), "");

  // Rank 1 takes micro-batch 1 first; rank 0 will only send it after B0,
  // which waits for rank 1.
  std::swap(Order[4], Order[6]); // 1F0 <-> 1F1
  EXPECT_EQ(errorOf(S, Order),
            "pipeline order deadlocks: rank 0 waits at its action 2 (0B0), "
            "which needs 1B0 (rank 1)");

  // A backward before its own forward.
  Order = orderOf(S);
  std::swap(Order[0], Order[2]); // 0F0 <-> 0B0
  EXPECT_NE(errorOf(S, Order).find("(0B0), which needs 0F0 (rank 0)"),
            std::string::npos);
}

TEST(ScheduleTest, MalformedOrdersAreErrors) {
  PipelineSpec S = uniform(ScheduleKind::OneFOneB, 2, 1, 2, 1, 2);
  std::vector<PipelineAction> Order = orderOf(S);
  Order[0].Stage = 1;
  EXPECT_NE(errorOf(S, Order).find("on another rank"), std::string::npos);

  Order = orderOf(S);
  Order[1].MicroBatch = 0; // 0F0 twice
  EXPECT_NE(errorOf(S, Order).find("rank 0 runs 0F0 twice"), std::string::npos);

  Order = orderOf(S);
  Order.pop_back();
  EXPECT_NE(errorOf(S, Order).find("7 actions, expected 8"), std::string::npos);
}

// The size the search runs thousands of times: it must stay exact.
TEST(ScheduleTest, LargePipeline) {
  PipelineResult R =
      simulate(uniform(ScheduleKind::Interleaved, 64, 2, 512, 1, 2));
  EXPECT_DOUBLE_EQ(R.StepSeconds, (512 + 63.0 / 2) * 3);
  EXPECT_EQ(R.PeakInFlight[0], 3 * 64 - 1u);
}

} // namespace
