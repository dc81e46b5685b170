//===- DropoutTest.cpp - Counter-based dropout masks ----------------------===//
//
// Philox4x32-10 against Random123's published known answers; a rank's
// block of a split tensor indexing the whole tensor as the whole would; the
// masks' drop rate and their independence across streams, steps and
// micro-batches; and the CPU's Dropout and DropoutGrad kernels.
//
//===----------------------------------------------------------------------===//

#include "RuntimeTestSupport.h"

#include "runtime/DropoutStream.h"

#include <cmath>

using namespace autopar;
using namespace autopar::test;

namespace {

// Random123's kat_vectors for philox4x32_10.
TEST(Dropout, PhiloxKnownAnswers) {
  Philox4x32 Zero = philox4x32(0, 0, 0, 0, 0, 0);
  EXPECT_EQ(Zero.V[0], 0x6627e8d5u);
  EXPECT_EQ(Zero.V[1], 0xe169c58du);
  EXPECT_EQ(Zero.V[2], 0xbc57ac4cu);
  EXPECT_EQ(Zero.V[3], 0x9b00dbd8u);
  Philox4x32 Ones = philox4x32(~0u, ~0u, ~0u, ~0u, ~0u, ~0u);
  EXPECT_EQ(Ones.V[0], 0x408f276du);
  EXPECT_EQ(Ones.V[1], 0x41c83b0eu);
  EXPECT_EQ(Ones.V[2], 0xa20bc7c6u);
  EXPECT_EQ(Ones.V[3], 0x6d5451fdu);
  Philox4x32 Pi = philox4x32(0x243f6a88u, 0x85a308d3u, 0x13198a2eu, 0x03707344u,
                             0xa4093822u, 0x299f31d0u);
  EXPECT_EQ(Pi.V[0], 0xd16cfe09u);
  EXPECT_EQ(Pi.V[1], 0x94fdccebu);
  EXPECT_EQ(Pi.V[2], 0x5001e420u);
  EXPECT_EQ(Pi.V[3], 0x24126ea1u);
}

// Each rank's block of [4, 6, 10] split 3 ways along dimension 1 and 2 ways
// along 2 holds the whole tensor's elements: its masks are the whole's.
TEST(Dropout, SplitBlocksIndexTheWholeTensor) {
  DropoutKey Key = makeDropoutKey(StepRandom{7, 3, 0}, 2, 1, 0.3);
  DropoutBlock Whole;
  Whole.Key = Key;
  Whole.Rank = 3;
  const int64_t G[] = {4, 6, 10};
  for (int D = 0; D != 3; ++D)
    Whole.Local[D] = Whole.Global[D] = G[D];
  std::vector<int> Seen(4 * 6 * 10, 0);
  for (int64_t R1 = 0; R1 != 3; ++R1)
    for (int64_t R2 = 0; R2 != 2; ++R2) {
      DropoutBlock B = Whole;
      B.Local[1] = 2;
      B.Local[2] = 5;
      B.Offset[1] = 2 * R1;
      B.Offset[2] = 5 * R2;
      for (int64_t I = 0; I != 4 * 2 * 5; ++I) {
        int64_t A = I / 10, J = I / 5 % 2, K = I % 5;
        int64_t Index = (A * 6 + 2 * R1 + J) * 10 + 5 * R2 + K;
        EXPECT_EQ(B.rowStart(I / 5) + uint64_t(K), uint64_t(Index));
        EXPECT_EQ(B.keeps(I), Whole.keeps(Index));
        ++Seen[Index];
      }
    }
  for (int S : Seen)
    EXPECT_EQ(S, 1);
}

// A run of draws (one Philox call per four indices) is the draws one by
// one, from any start.
TEST(Dropout, KeepsRunIsKeepsOneByOne) {
  DropoutKey Key = makeDropoutKey(StepRandom{3, 2, 1}, 4, 5, 0.4);
  for (uint64_t Start : {0u, 1u, 3u, 6u})
    for (int64_t Len : {0, 1, 3, 4, 9}) {
      std::vector<uint8_t> Run(size_t(Len), 7);
      Key.keepsRun(Start, Len, Run.data());
      for (int64_t J = 0; J != Len; ++J)
        EXPECT_EQ(Run[J], Key.keeps(Start + uint64_t(J))) << Start << " " << J;
    }
}

/// The fraction of [0, N) that Key drops.
double dropRate(const DropoutKey &Key, int64_t N) {
  int64_t Dropped = 0;
  for (int64_t I = 0; I != N; ++I)
    Dropped += !Key.keeps(uint64_t(I));
  return double(Dropped) / double(N);
}

// The drop rate is the ratio (within 5 standard deviations at 2^18
// draws), and another stream, step, micro-batch or seed draws another mask
// (two independent masks of rate p differ in 2p(1 - p) of the elements).
TEST(Dropout, MasksDropTheRatioIndependently) {
  const int64_t N = 1 << 18;
  for (double P : {0.1, 0.5}) {
    DropoutKey Key = makeDropoutKey(StepRandom{1, 1, 0}, 0, 0, P);
    double Sigma = std::sqrt(P * (1 - P) / N);
    EXPECT_NEAR(dropRate(Key, N), P, 5 * Sigma);
    EXPECT_FLOAT_EQ(Key.Scale, float(1 / (1 - P)));
    const DropoutKey Others[] = {makeDropoutKey(StepRandom{1, 1, 0}, 1, 0, P),
                                 makeDropoutKey(StepRandom{1, 2, 0}, 0, 0, P),
                                 makeDropoutKey(StepRandom{1, 1, 0}, 0, 1, P),
                                 makeDropoutKey(StepRandom{2, 1, 0}, 0, 0, P)};
    for (const DropoutKey &Other : Others) {
      int64_t Differ = 0;
      for (int64_t I = 0; I != N; ++I)
        Differ += Key.keeps(uint64_t(I)) != Other.keeps(uint64_t(I));
      double Want = 2 * P * (1 - P);
      EXPECT_NEAR(double(Differ) / N, Want, 5 * std::sqrt(Want / N));
    }
  }
  EXPECT_EQ(dropRate(makeDropoutKey(StepRandom{1, 1, 0}, 0, 0, 0), 4096), 0);
}

// The CPU kernels: kept elements scaled by 1 / (1 - ratio), the rest 0, the
// mask saying which; the gradient through the same mask; the rate near the
// ratio.
TEST(Dropout, CpuKernels) {
  const int64_t N = 64 * 256;
  std::vector<float> X(N), DY(N);
  for (int64_t I = 0; I != N; ++I) {
    X[I] = 1 + float(I % 13);
    DY[I] = 2 - float(I % 7);
  }
  std::vector<HostTensor> Out =
      runProgram(R"(
graph @g(%x: f32[64, 256], %dy: f32[64, 256]) {
  %ratio = Constant() {value = dense<f32[], [0.2]>} : f32[]
  %on = Constant() {value = dense<bool[], [true]>} : bool[]
  %y, %mask = Dropout(%x, %ratio, %on) {rng_stream = 5} : f32[64, 256], bool[64, 256]
  %dx = DropoutGrad(%dy, %mask) {ratio = 0.2} : f32[64, 256]
  return %y, %mask, %dx
})",
                 {f32({64, 256}, X), f32({64, 256}, DY)});
  ASSERT_EQ(Out.size(), 3u);
  std::vector<float> Y = floatsOf(Out[0]), DX = floatsOf(Out[2]);
  const std::vector<uint8_t> &Mask = Out[1].Bytes;
  ASSERT_EQ(Mask.size(), size_t(N));
  DropoutKey Key = makeDropoutKey(StepRandom{}, 5, 0, 0.2);
  int64_t Dropped = 0;
  for (int64_t I = 0; I != N; ++I) {
    bool Keep = Key.keeps(uint64_t(I));
    ASSERT_EQ(Mask[I], Keep) << I;
    EXPECT_EQ(Y[I], Keep ? X[I] * Key.Scale : 0.0f) << I;
    EXPECT_EQ(DX[I], Keep ? DY[I] * Key.Scale : 0.0f) << I;
    Dropped += !Keep;
  }
  EXPECT_NEAR(double(Dropped) / N, 0.2, 5 * std::sqrt(0.16 / N));
}

// Training mode without a random stream is an error that names the pass,
// never a silent copy; inference mode copies.
TEST(Dropout, TrainingWithoutAStreamIsAnError) {
  std::string Error;
  runProgram(R"(
graph @g(%x: f32[4]) {
  %ratio = Constant() {value = dense<f32[], [0.2]>} : f32[]
  %on = Constant() {value = dense<bool[], [true]>} : bool[]
  %y = Dropout(%x, %ratio, %on) : f32[4]
  return %y
})",
             {f32({4}, {1, 2, 3, 4})}, &Error);
  EXPECT_NE(Error.find("run dropout-streams"), std::string::npos) << Error;
  std::vector<HostTensor> Out = runProgram(R"(
graph @g(%x: f32[4]) {
  %y = Dropout(%x) : f32[4]
  return %y
})",
                                           {f32({4}, {1, 2, 3, 4})});
  ASSERT_EQ(Out.size(), 1u);
  EXPECT_EQ(floatsOf(Out[0]), (std::vector<float>{1, 2, 3, 4}));
}

} // namespace
