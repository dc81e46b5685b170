//===- RuntimeKernelThreadsTest.cpp - parallelFor and the vector math -----===//
//
// parallelFor's kept threads (runtime/cpu/KernelThreads.cpp): every index
// once, calls after calls, nested calls on the caller's thread; and the
// vectorized math of runtime/cpu/VectorMath.h against libm in f64.
//
//===----------------------------------------------------------------------===//

#include "runtime/cpu/Kernels.h"
#include "runtime/cpu/VectorMath.h"

#include "gtest/gtest.h"

#include <algorithm>
#include <atomic>
#include <cmath>
#include <limits>
#include <thread>
#include <vector>

using namespace autopar;

namespace {

/// Restores one kernel thread when a test ends.
struct KernelThreadsGuard {
  explicit KernelThreadsGuard(int Threads) { setKernelThreads(Threads); }
  ~KernelThreadsGuard() { setKernelThreads(1); }
};

TEST(KernelThreadsTest, EveryIndexOnceOverManyCalls) {
  KernelThreadsGuard Guard(3);
  for (int64_t N : {0, 1, 2, 3, 7, 100, 1001}) {
    for (int Call = 0; Call != 20; ++Call) {
      std::vector<std::atomic<int>> Seen(N);
      parallelFor(N, [&](int64_t I) { ++Seen[I]; });
      for (int64_t I = 0; I != N; ++I)
        ASSERT_EQ(Seen[I].load(), 1) << "N " << N << " index " << I;
    }
  }
}

TEST(KernelThreadsTest, UsesSeveralThreads) {
  KernelThreadsGuard Guard(2);
  std::vector<std::thread::id> Ids(2);
  // Index 0 runs on the caller and index 1 on a kept thread: the split is
  // fixed, not taken by whichever thread is free.
  parallelFor(2, [&](int64_t I) { Ids[I] = std::this_thread::get_id(); });
  EXPECT_NE(Ids[0], Ids[1]);
}

TEST(KernelThreadsTest, NestedCallsRunOnTheirThread) {
  KernelThreadsGuard Guard(2);
  std::vector<std::atomic<int>> Seen(16);
  parallelFor(4, [&](int64_t Outer) {
    std::thread::id Me = std::this_thread::get_id();
    parallelFor(4, [&](int64_t Inner) {
      EXPECT_EQ(std::this_thread::get_id(), Me);
      ++Seen[Outer * 4 + Inner];
    });
  });
  for (const std::atomic<int> &S : Seen)
    EXPECT_EQ(S.load(), 1);
}

/// Each test runs with the kernels this CPU gets (AVX2 and FMA where it
/// has them) and with the portable ones.
class VectorMathTest : public ::testing::TestWithParam<bool> {
protected:
  void SetUp() override { setGenericVectorMath(GetParam()); }
  void TearDown() override { setGenericVectorMath(false); }
};

INSTANTIATE_TEST_SUITE_P(Kernels, VectorMathTest, ::testing::Bool(),
                         [](const ::testing::TestParamInfo<bool> &Info) {
                           return Info.param ? "Portable" : "ThisCpu";
                         });

TEST_P(VectorMathTest, GeluAndItsGradientMatchLibm) {
  std::vector<float> X;
  for (float V = -12; V <= 12; V += 0.37f)
    X.push_back(V);
  X.push_back(20); // exp(-x^2 / 2) far below the smallest normal
  std::vector<float> Y(X.size()), DX(X.size()), DY(X.size(), 1.5f);
  for (bool Tanh : {false, true}) {
    geluArray(X.data(), Y.data(), int64_t(X.size()), Tanh);
    geluGradArray(DY.data(), X.data(), DX.data(), int64_t(X.size()), Tanh);
    for (size_t I = 0; I != X.size(); ++I) {
      double V = X[I], Want, Slope;
      if (Tanh) {
        double C = std::sqrt(2 / M_PI), K = 0.044715;
        double T = std::tanh(C * (V + K * V * V * V));
        Want = 0.5 * V * (1 + T);
        Slope = 0.5 * (1 + T) + 0.5 * V * (1 - T * T) * C * (1 + 3 * K * V * V);
      } else {
        Want = 0.5 * V * (1 + std::erf(V / std::sqrt(2.0)));
        Slope = 0.5 * (1 + std::erf(V / std::sqrt(2.0))) +
                V * std::exp(-0.5 * V * V) / std::sqrt(2 * M_PI);
      }
      EXPECT_NEAR(Y[I], Want, 1e-6 * std::max(1.0, std::fabs(Want)))
          << "x " << V << (Tanh ? " tanh" : " erf");
      EXPECT_NEAR(DX[I], 1.5 * Slope, 1e-5) << "x " << V;
      EXPECT_FALSE(std::fpclassify(DX[I]) == FP_SUBNORMAL);
    }
  }
}

TEST_P(VectorMathTest, ExpShiftedGivesZerosNotSubnormalsInPlace) {
  const float Inf = std::numeric_limits<float>::infinity();
  std::vector<float> X{0.5f, -Inf, -1.0f, -90.0f, -86.0f, 2.0f};
  std::vector<float> Y = X;
  double Sum = expShifted(Y.data(), 2.0f, Y.data(), int64_t(Y.size()));
  double Want = 0;
  for (size_t I = 0; I != X.size(); ++I) {
    double E = std::exp(double(X[I]) - 2.0);
    if (E < 2.4e-38)
      E = 0;
    EXPECT_NEAR(Y[I], E, 1e-6 * E) << "x " << X[I];
    EXPECT_FALSE(std::fpclassify(Y[I]) == FP_SUBNORMAL) << "x " << X[I];
    Want += E;
  }
  EXPECT_EQ(Y[1], 0.0f);
  EXPECT_EQ(Y[3], 0.0f);
  EXPECT_NEAR(Sum, Want, 1e-6 * Want);
  EXPECT_EQ(maxOf(X.data(), int64_t(X.size())), 2.0f);
  EXPECT_EQ(maxOf(X.data(), 0), -Inf);
}

TEST_P(VectorMathTest, AdamWFollowsTorchsOrder) {
  std::vector<float> P{1, -2, 0.5f}, G{0.1f, -0.3f, 2}, M{0.01f, 0, -0.1f},
      V{0.001f, 0.002f, 0.5f};
  AdamWScalars S;
  float Lr = 0.01f, B1 = 0.9f, B2 = 0.999f, Eps = 1e-8f, Wd = 0.1f, T = 3;
  S.Decay = float(1 - double(Lr) * Wd);
  S.Beta1 = B1;
  S.OneMinusBeta1 = float(1 - double(B1));
  S.Beta2 = B2;
  S.OneMinusBeta2 = float(1 - double(B2));
  S.StepSize = float(Lr / (1 - std::pow(double(B1), T)));
  S.Correction2Sqrt = float(std::sqrt(1 - std::pow(double(B2), T)));
  S.Eps = Eps;
  std::vector<float> PO = P, MO = M, VO = V;
  // In place, as the executor runs it.
  adamWArray(PO.data(), G.data(), MO.data(), VO.data(), PO.data(), MO.data(),
             VO.data(), 3, S);
  for (int I = 0; I != 3; ++I) {
    float Mean = M[I] * S.Beta1 + G[I] * S.OneMinusBeta1;
    float Square = V[I] * S.Beta2 + G[I] * G[I] * S.OneMinusBeta2;
    float Param =
        P[I] * S.Decay -
        S.StepSize * Mean / (std::sqrt(Square) / S.Correction2Sqrt + S.Eps);
    EXPECT_FLOAT_EQ(MO[I], Mean);
    EXPECT_FLOAT_EQ(VO[I], Square);
    EXPECT_FLOAT_EQ(PO[I], Param);
  }
}

} // namespace

// With AVX2, every element is computed the same way wherever it lies: an
// array's elements equal those of the same values in arrays of every other
// length (the vector body against the masked tail). Eigen's portable
// kernels take their tails one element at a time through the C library,
// within a few ulp; AdamW is the same on both. NaN stays NaN.
TEST_P(VectorMathTest, ElementsDoNotDependOnTheirPosition) {
  std::vector<float> X;
  for (int I = 0; I != 37; ++I)
    X.push_back(-6.0f + 0.33f * float(I));
  int64_t N = int64_t(X.size());
  std::vector<float> Full(N), FullGrad(N), FullExp(N), DY(N, 0.75f);
  for (bool Tanh : {false, true}) {
    geluArray(X.data(), Full.data(), N, Tanh);
    geluGradArray(DY.data(), X.data(), FullGrad.data(), N, Tanh);
    expShifted(X.data(), 1.0f, FullExp.data(), N);
    for (int64_t Begin = 0; Begin != N; ++Begin)
      for (int64_t Len = 1; Begin + Len <= N && Len <= 17; ++Len) {
        std::vector<float> Y(Len), G(Len), E(Len);
        geluArray(X.data() + Begin, Y.data(), Len, Tanh);
        geluGradArray(DY.data() + Begin, X.data() + Begin, G.data(), Len, Tanh);
        expShifted(X.data() + Begin, 1.0f, E.data(), Len);
        auto Same = [&](float A, float B) {
          return GetParam() ? std::fabs(A - B) <= 4e-7f * std::fabs(B) + 1e-30f
                            : A == B;
        };
        for (int64_t I = 0; I != Len; ++I) {
          ASSERT_TRUE(Same(Y[I], Full[Begin + I])) << Begin << "+" << I;
          ASSERT_TRUE(Same(G[I], FullGrad[Begin + I])) << Begin << "+" << I;
          ASSERT_TRUE(Same(E[I], FullExp[Begin + I])) << Begin << "+" << I;
        }
        float Max =
            *std::max_element(X.begin() + Begin, X.begin() + Begin + Len);
        ASSERT_EQ(maxOf(X.data() + Begin, Len), Max) << Begin << "+" << Len;
      }
  }
  // AdamW in place, as the executor runs it.
  AdamWScalars S{0.999f, 0.9f, 0.1f, 0.999f, 0.001f, 0.01f, 0.03f, 1e-8f};
  std::vector<float> P0(N), M0(N), V0(N);
  for (int64_t I = 0; I != N; ++I) {
    P0[I] = X[I];
    M0[I] = 0.01f * X[I];
    V0[I] = 0.001f * X[I] * X[I];
  }
  std::vector<float> PF = P0, MF = M0, VF = V0;
  adamWArray(PF.data(), DY.data(), MF.data(), VF.data(), PF.data(), MF.data(),
             VF.data(), N, S);
  for (int64_t Begin = 0; Begin != N; ++Begin)
    for (int64_t Len = 1; Begin + Len <= N && Len <= 17; ++Len) {
      std::vector<float> P(P0.begin() + Begin, P0.begin() + Begin + Len),
          M(M0.begin() + Begin, M0.begin() + Begin + Len),
          V(V0.begin() + Begin, V0.begin() + Begin + Len);
      adamWArray(P.data(), DY.data() + Begin, M.data(), V.data(), P.data(),
                 M.data(), V.data(), Len, S);
      for (int64_t I = 0; I != Len; ++I) {
        ASSERT_EQ(P[I], PF[Begin + I]) << Begin << "+" << I;
        ASSERT_EQ(M[I], MF[Begin + I]) << Begin << "+" << I;
        ASSERT_EQ(V[I], VF[Begin + I]) << Begin << "+" << I;
      }
    }
  float Nan = std::numeric_limits<float>::quiet_NaN();
  std::vector<float> WithNan{1.0f, Nan, -2.0f};
  std::vector<float> Out(3);
  geluArray(WithNan.data(), Out.data(), 3, false);
  EXPECT_TRUE(std::isnan(Out[1]));
  expShifted(WithNan.data(), 0.0f, Out.data(), 3);
  EXPECT_TRUE(std::isnan(Out[1]));
}
