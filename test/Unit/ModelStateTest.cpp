//===- ModelStateTest.cpp - Model states as the runtime holds them --------===//
//
// getModelStateMemory (cost/ModelState.h): the gradient synchronization's
// transient, ZeRO-3's gathers and offload's fetch buffers, each against the
// figure the runtime's accounting gives for the same program; and
// largestNeighbourElements (cost/HeldParams.h), which finds what two
// neighbouring uses or parameters hold.
//
//===----------------------------------------------------------------------===//

#include "cost/ModelState.h"
#include "cost/HeldParams.h"

#include "gtest/gtest.h"

using namespace autopar;

namespace {

constexpr double MiB = 1024.0 * 1024.0;

/// fp32 AdamW over Params elements, Nd data-parallel ranks, ZeRO Zero.
ModelStateConfig fp32(double Params, unsigned Nd, unsigned Zero) {
  ModelStateConfig C;
  C.Params = Params;
  C.DataParallel = Nd;
  C.ZeroStage = Zero;
  setTrainingPrecision(C, Precision::FP32);
  return C;
}

TEST(ModelStateTest, OneRankHasNoSynchronization) {
  ModelStateMemory M = getModelStateMemory(fp32(1000, 1, 0));
  EXPECT_EQ(M.GradSyncBytes, 0);
  EXPECT_EQ(M.GradBytes, 4000);
  EXPECT_EQ(M.OptimizerBytes, 8000);
}

TEST(ModelStateTest, AllReduceHoldsOneBucketOnTopOfTheGradients) {
  // 1000 elements: one bucket of 4000 bytes, concatenated and reduced.
  ModelStateMemory M = getModelStateMemory(fp32(1000, 2, 0));
  EXPECT_EQ(M.GradSyncBytes, 4000);
  EXPECT_EQ(M.GradBytes, 8000);
  // A model larger than the cap: one 25 MiB bucket.
  ModelStateMemory Big = getModelStateMemory(fp32(100 * MiB, 2, 0));
  EXPECT_EQ(Big.GradSyncBytes, GradientBucketBytes);
  // A gradient larger than the cap is a bucket of its own.
  ModelStateConfig C = fp32(100 * MiB, 2, 0);
  C.LargestParam = 10 * MiB;
  EXPECT_EQ(getModelStateMemory(C).GradSyncBytes, 40 * MiB);
}

TEST(ModelStateTest, ReduceScatterKeepsShardsAndTheBucketsCopies) {
  // ZeRO-2 on 2 ranks: shards (2000) plus the bucket's whole gradients
  // and their concatenation, less its own shards not yet made: 2B - B/2.
  ModelStateMemory M = getModelStateMemory(fp32(1000, 2, 2));
  EXPECT_EQ(M.GradBytes, 2000 + 2 * 4000 - 2000);
  EXPECT_EQ(M.OptimizerBytes, 4000);
  // ZeRO-1 over one micro-batch reduces as ZeRO-2 does...
  EXPECT_EQ(getModelStateMemory(fp32(1000, 2, 1)).GradBytes, M.GradBytes);
  // ...and over several keeps the whole sums, reduced once per step.
  ModelStateConfig C = fp32(1000, 2, 1);
  C.MicroBatches = 4;
  EXPECT_EQ(getModelStateMemory(C).GradBytes, 4000 + 4000);
}

TEST(ModelStateTest, ZeroDividesOnlyWhatItShards) {
  // 1000 elements on 4 ranks, 400 of them in parameters whose dimension 0
  // 4 does not divide: those keep whole optimizer states, gradients and
  // (ZeRO-3) weights; the other 600 are divided.
  ModelStateConfig C = fp32(1000, 4, 1);
  C.WholeParams = 400;
  EXPECT_EQ(getModelStateMemory(C).OptimizerBytes, 600 * 8 / 4 + 400 * 8);
  C.ZeroStage = 3;
  ModelStateMemory M = getModelStateMemory(C);
  EXPECT_EQ(M.WeightBytes, 600 * 4 / 4 + 400 * 4);
  EXPECT_EQ(M.OptimizerBytes, 600 * 8 / 4 + 400 * 8);
  EXPECT_EQ(M.GradBytes - M.GradSyncBytes, 600 * 4 / 4 + 400 * 4);
  // Padded rows are held like rows: 20 padding elements over the ranks,
  // and an fp32 parameter's home (ZeRO-1/2) holds them whole.
  ModelStateConfig P = fp32(1000, 4, 1);
  P.PaddingParams = 20;
  EXPECT_EQ(getModelStateMemory(P).OptimizerBytes, 1020 * 8 / 4);
  EXPECT_EQ(getModelStateMemory(P).WeightBytes, 1020 * 4);
  P.ZeroStage = 3;
  EXPECT_EQ(getModelStateMemory(P).WeightBytes, 1020 * 4 / 4);
  // Nothing shardable is ZeRO-0's states.
  C.WholeParams = 1000;
  C.ZeroStage = 1;
  EXPECT_EQ(getModelStateMemory(C).OptimizerBytes,
            getModelStateMemory(fp32(1000, 4, 0)).OptimizerBytes);
}

TEST(ModelStateTest, ZeroThreeGathersTwoUses) {
  ModelStateConfig C = fp32(1000, 2, 3);
  C.UsePairParams = 300;
  ModelStateMemory M = getModelStateMemory(C);
  EXPECT_EQ(M.WeightBytes, 2000);
  EXPECT_EQ(M.GatherBufferBytes, 1200);
  // One rank gathers nothing.
  C.DataParallel = 1;
  EXPECT_EQ(getModelStateMemory(C).GatherBufferBytes, 0);
}

TEST(ModelStateTest, OffloadKeepsWhatItFetches) {
  // The optimizer offloaded: the step streams a parameter's moments and
  // prefetches the next's; two gradients are on the device.
  ModelStateConfig C = fp32(1000, 1, 1);
  C.Offload = OffloadKind::OptimizerCpu;
  C.LargestParam = 100;
  C.StepPairParams = 150;
  C.UsePairParams = 200;
  ModelStateMemory M = getModelStateMemory(C);
  EXPECT_EQ(M.WeightBytes, 4000);
  EXPECT_EQ(M.OptimizerBytes, 150 * 8);
  EXPECT_EQ(M.GradBytes, 2 * 100 * 4);
  EXPECT_EQ(M.HostBytes, 8000 + 4000);
  // Everything offloaded: two uses' weights fetched, or the step's stream
  // (moments and weight), whichever is larger.
  C.ZeroStage = 3;
  C.Offload = OffloadKind::AllCpu;
  M = getModelStateMemory(C);
  EXPECT_EQ(M.WeightBytes, 200 * 4);
  EXPECT_EQ(M.WeightBytes + M.OptimizerBytes, 150 * 12);
  EXPECT_EQ(M.FetchBufferBytes, 150 * 12);
  EXPECT_EQ(M.HostBytes, 8000 + 4000 + 4000);
}

TEST(ModelStateTest, NeighboursByParameterAndByUse) {
  // A fused Linear (reader 0: weight 100, bias 10), then a table (reader
  // 1: 60), then another Linear (reader 2: 100 and 10).
  std::vector<HeldParam> Held = {{nullptr, 100, 0},
                                 {nullptr, 10, 0},
                                 {nullptr, 60, 1},
                                 {nullptr, 100, 2},
                                 {nullptr, 10, 2}};
  EXPECT_EQ(largestNeighbourElements(Held, /*ByUse=*/false), 160);
  EXPECT_EQ(largestNeighbourElements(Held, /*ByUse=*/true), 110 + 60);
  EXPECT_EQ(largestNeighbourElements({Held.data(), 1}, false), 100);
  EXPECT_EQ(largestNeighbourElements({}, true), 0);
}

} // namespace
