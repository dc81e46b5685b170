//===- LrScheduleTest.cpp - The learning rate of each step ----------------===//
//
// Warmup, the decays, and what comes after the decay's end; the tests
// against PyTorch's schedulers are test/Runtime/train-lr-schedule.test.
//
//===----------------------------------------------------------------------===//

#include "runtime/LrSchedule.h"

#include "gtest/gtest.h"

#include <cmath>

using namespace autopar;

namespace {

TEST(LrScheduleTest, WarmupThenCosineToTheMinimum) {
  LrSchedule S;
  S.Decay = LrDecay::Cosine;
  S.Peak = 1.0;
  S.Min = 0.1;
  S.WarmupSteps = 4;
  S.DecaySteps = 12;
  EXPECT_DOUBLE_EQ(S.at(1), 0.25);
  EXPECT_DOUBLE_EQ(S.at(4), 1.0);
  // The step after the warmup is at the peak, then half way (step 9 of a
  // decay over steps 5 to 12) at the mean of the two.
  EXPECT_DOUBLE_EQ(S.at(5), 1.0);
  EXPECT_NEAR(S.at(9), 0.55, 1e-12);
  EXPECT_NEAR(S.at(13), 0.1, 1e-12);
  EXPECT_NEAR(S.at(100), 0.1, 1e-12);
  EXPECT_FALSE(bool(S.validate()));
}

TEST(LrScheduleTest, LinearAndConstant) {
  LrSchedule S;
  S.Decay = LrDecay::Linear;
  S.Peak = 2.0;
  S.DecaySteps = 4;
  EXPECT_DOUBLE_EQ(S.at(1), 2.0);
  EXPECT_DOUBLE_EQ(S.at(3), 1.0);
  EXPECT_DOUBLE_EQ(S.at(5), 0.0);
  S.Decay = LrDecay::Constant;
  EXPECT_DOUBLE_EQ(S.at(3), 2.0);
  S.WarmupSteps = 2;
  EXPECT_DOUBLE_EQ(S.at(1), 1.0);
  EXPECT_DOUBLE_EQ(S.at(7), 2.0);
}

TEST(LrScheduleTest, NamesAndBadSchedules) {
  EXPECT_EQ(parseLrDecay("cosine"), LrDecay::Cosine);
  EXPECT_EQ(parseLrDecay("linear"), LrDecay::Linear);
  EXPECT_EQ(parseLrDecay("constant"), LrDecay::Constant);
  EXPECT_FALSE(parseLrDecay("step"));
  LrSchedule S;
  S.Decay = LrDecay::Cosine;
  S.WarmupSteps = 3;
  S.DecaySteps = 3;
  llvm::Error E = S.validate();
  ASSERT_TRUE(bool(E));
  EXPECT_NE(llvm::toString(std::move(E)).find("--lr-decay-steps"),
            std::string::npos);
  S.DecaySteps = 4;
  S.Min = 1; // above the peak
  llvm::Error Min = S.validate();
  ASSERT_TRUE(bool(Min));
  EXPECT_NE(llvm::toString(std::move(Min)).find("--min-lr"), std::string::npos);
}

} // namespace
