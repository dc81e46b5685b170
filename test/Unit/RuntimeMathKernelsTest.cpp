//===- RuntimeMathKernelsTest.cpp - The CPU kernels of issue 22's ops -----===//
//
// The elementwise ops, reductions, ArgMax/ArgMin and Hardmax that issue 22
// added, each run in a small program on the CPU backend and compared with
// the formula of the ONNX operator evaluated here in f64, or with values
// worked out by hand (rounding, signs, remainders, bits, indices).
//
//===----------------------------------------------------------------------===//

#include "RuntimeTestSupport.h"

#include <cmath>
#include <functional>
#include <limits>

using namespace autopar;
using namespace autopar::test;

namespace {

const float NaN = std::numeric_limits<float>::quiet_NaN();
const float Inf = std::numeric_limits<float>::infinity();

HostTensor i32(llvm::ArrayRef<int64_t> Shape, llvm::ArrayRef<int32_t> Values) {
  return makeTensor<int32_t>(ElementType::I32, Shape, Values);
}
HostTensor u8(llvm::ArrayRef<int64_t> Shape, llvm::ArrayRef<uint8_t> Values) {
  return makeTensor<uint8_t>(ElementType::U8, Shape, Values);
}

/// Fn applied to each of Xs in f64, rounded to f32.
std::vector<float> mapRef(const std::vector<float> &Xs,
                          const std::function<double(double)> &Fn) {
  std::vector<float> R;
  for (float X : Xs)
    R.push_back(float(Fn(X)));
  return R;
}

/// Expects equal floats where both are NaN or equal within Tolerance.
void expectSameFloats(const std::vector<float> &Actual,
                      const std::vector<float> &Expected, float Tolerance = 0) {
  ASSERT_EQ(Actual.size(), Expected.size());
  for (size_t I = 0; I != Actual.size(); ++I) {
    if (std::isnan(Expected[I]))
      EXPECT_TRUE(std::isnan(Actual[I])) << "at element " << I;
    else if (std::isinf(Expected[I]))
      EXPECT_EQ(Actual[I], Expected[I]) << "at element " << I;
    else
      EXPECT_NEAR(Actual[I], Expected[I], Tolerance) << "at element " << I;
  }
}

TEST(RuntimeMathKernels, UnaryFunctionsFollowTheOnnxFormulas) {
  std::vector<float> X = {-3.5f, -1.25f, -0.6f, -0.1f, 0.0f,
                          0.2f,  0.75f,  1.0f,  2.5f,  4.0f};
  std::vector<float> U = {-0.9f, -0.5f, -0.25f, 0.0f, 0.1f,
                          0.3f,  0.45f, 0.6f,   0.8f, 0.95f};
  std::vector<float> G = {1.0f, 1.1f, 1.5f, 2.0f,  3.0f,
                          4.5f, 6.0f, 9.0f, 20.0f, 100.0f};
  std::vector<HostTensor> Out =
      runProgram(R"(
graph @g(%x: f32[10], %u: f32[10], %g: f32[10]) {
  %ceil = Ceil(%x) : f32[10]
  %floor = Floor(%x) : f32[10]
  %sin = Sin(%x) : f32[10]
  %cos = Cos(%x) : f32[10]
  %tan = Tan(%x) : f32[10]
  %asin = Asin(%u) : f32[10]
  %acos = Acos(%u) : f32[10]
  %atan = Atan(%x) : f32[10]
  %sinh = Sinh(%x) : f32[10]
  %cosh = Cosh(%x) : f32[10]
  %asinh = Asinh(%x) : f32[10]
  %acosh = Acosh(%g) : f32[10]
  %atanh = Atanh(%u) : f32[10]
  %softplus = Softplus(%x) : f32[10]
  %softsign = Softsign(%x) : f32[10]
  %elu = Elu(%x) {alpha = 0.5} : f32[10]
  %selu = Selu(%x) : f32[10]
  %celu = Celu(%x) {alpha = 2.0} : f32[10]
  %hsig = HardSigmoid(%x) : f32[10]
  %hswish = HardSwish(%x) : f32[10]
  %mish = Mish(%x) : f32[10]
  %trelu = ThresholdedRelu(%x) {alpha = 0.5} : f32[10]
  %shrink = Shrink(%x) {bias = 0.25, lambd = 0.6} : f32[10]
  return %ceil, %floor, %sin, %cos, %tan, %asin, %acos, %atan, %sinh, %cosh, %asinh, %acosh, %atanh, %softplus, %softsign, %elu, %selu, %celu, %hsig, %hswish, %mish, %trelu, %shrink
})",
                 {f32({10}, X), f32({10}, U), f32({10}, G)});
  ASSERT_EQ(Out.size(), 23u);
  // The formulas of the ONNX operators' specs, naively in f64.
  const double SeluAlpha = 1.67326319217681884765625,
               SeluGamma = 1.05070102214813232421875;
  auto Softplus = [](double V) { return std::log(std::exp(V) + 1); };
  std::vector<std::vector<float>> Want = {
      mapRef(X, [](double V) { return std::ceil(V); }),
      mapRef(X, [](double V) { return std::floor(V); }),
      mapRef(X, [](double V) { return std::sin(V); }),
      mapRef(X, [](double V) { return std::cos(V); }),
      mapRef(X, [](double V) { return std::tan(V); }),
      mapRef(U, [](double V) { return std::asin(V); }),
      mapRef(U, [](double V) { return std::acos(V); }),
      mapRef(X, [](double V) { return std::atan(V); }),
      mapRef(X, [](double V) { return std::sinh(V); }),
      mapRef(X, [](double V) { return std::cosh(V); }),
      mapRef(X, [](double V) { return std::log(V + std::sqrt(V * V + 1)); }),
      mapRef(G, [](double V) { return std::log(V + std::sqrt(V * V - 1)); }),
      mapRef(U, [](double V) { return 0.5 * std::log((1 + V) / (1 - V)); }),
      mapRef(X, Softplus),
      mapRef(X, [](double V) { return V / (1 + std::fabs(V)); }),
      mapRef(X, [](double V) { return V < 0 ? 0.5 * (std::exp(V) - 1) : V; }),
      mapRef(X,
             [&](double V) {
               return V <= 0 ? SeluGamma * (SeluAlpha * std::exp(V) - SeluAlpha)
                             : SeluGamma * V;
             }),
      mapRef(X,
             [](double V) {
               return std::max(0.0, V) +
                      std::min(0.0, 2 * (std::exp(V / 2) - 1));
             }),
      mapRef(
          X,
          [](double V) { return std::max(0.0, std::min(1.0, 0.2 * V + 0.5)); }),
      mapRef(X,
             [](double V) {
               return V * std::max(0.0, std::min(1.0, V / 6 + 0.5));
             }),
      mapRef(X, [&](double V) { return V * std::tanh(Softplus(V)); }),
      mapRef(X, [](double V) { return V > 0.5 ? V : 0.0; }),
      // lambd is the f32 attribute 0.6f, which x = -0.6f equals.
      mapRef(X,
             [](double V) {
               const double Lambd = 0.6f;
               return V < -Lambd ? V + 0.25 : V > Lambd ? V - 0.25 : 0.0;
             }),
  };
  const char *Names[] = {"Ceil",        "Floor",
                         "Sin",         "Cos",
                         "Tan",         "Asin",
                         "Acos",        "Atan",
                         "Sinh",        "Cosh",
                         "Asinh",       "Acosh",
                         "Atanh",       "Softplus",
                         "Softsign",    "Elu",
                         "Selu",        "Celu",
                         "HardSigmoid", "HardSwish",
                         "Mish",        "ThresholdedRelu",
                         "Shrink"};
  for (size_t I = 0; I != Want.size(); ++I) {
    SCOPED_TRACE(Names[I]);
    // Relative to the value's size: Cosh reaches 27.
    std::vector<float> Got = floatsOf(Out[I]);
    ASSERT_EQ(Got.size(), Want[I].size());
    for (size_t J = 0; J != Got.size(); ++J)
      EXPECT_NEAR(Got[J], Want[I][J],
                  2e-6f * std::max(1.0f, std::fabs(Want[I][J])))
          << "at element " << J;
  }
}

TEST(RuntimeMathKernels, RoundIsHalfToEvenAndSignKeepsNaN) {
  std::vector<HostTensor> Out = runProgram(
      R"(
graph @g(%x: f32[9], %n: i64[4], %i: i32[3]) {
  %r = Round(%x) : f32[9]
  %s = Sign(%x) : f32[9]
  %sn = Sign(%n) : i64[4]
  %si = Sign(%i) : i32[3]
  return %r, %s, %sn, %si
})",
      {f32({9}, {-2.5f, -1.5f, -0.5f, 0.5f, 1.5f, 2.5f, 2.6f, 0.0f, NaN}),
       i64({4}, {-9, 0, 7, INT64_MIN}), i32({3}, {5, -1, 0})});
  ASSERT_EQ(Out.size(), 4u);
  expectSameFloats(floatsOf(Out[0]), {-2, -2, -0.0f, 0, 2, 2, 3, 0, NaN});
  expectSameFloats(floatsOf(Out[1]), {-1, -1, -1, 1, 1, 1, 1, 0, NaN});
  EXPECT_EQ(elementsOf<int64_t>(Out[2]), (std::vector<int64_t>{-1, 0, 1, -1}));
  EXPECT_EQ(elementsOf<int32_t>(Out[3]), (std::vector<int32_t>{1, -1, 0}));
}

TEST(RuntimeMathKernels, ClipShrinkAndClassesOfFloats) {
  std::vector<HostTensor> Out = runProgram(
      R"(
graph @g(%x: f32[6], %n: i64[5]) {
  %lo = Constant() {value = dense<f32[], [-1.0]>} : f32[]
  %hi = Constant() {value = dense<f32[1], [2.0]>} : f32[1]
  %nlo = Constant() {value = dense<i64[], [-3]>} : i64[]
  %both = Clip(%x, %lo, %hi) : f32[6]
  %upper = Clip(%x, _, %hi) : f32[6]
  %none = Clip(%x) : f32[6]
  %ints = Clip(%n, %nlo) : i64[5]
  %shrink = Shrink(%n) {bias = 2.0, lambd = 3.0} : i64[5]
  %nan = IsNaN(%x) : bool[6]
  %inf = IsInf(%x) : bool[6]
  %pos = IsInf(%x) {detect_negative = 0} : bool[6]
  %neg = IsInf(%x) {detect_positive = 0} : bool[6]
  return %both, %upper, %none, %ints, %shrink, %nan, %inf, %pos, %neg
})",
      {f32({6}, {-5, 0.5f, 3, NaN, Inf, -Inf}), i64({5}, {-7, -3, 0, 4, 10})});
  ASSERT_EQ(Out.size(), 9u);
  expectSameFloats(floatsOf(Out[0]), {-1, 0.5f, 2, NaN, 2, -1});
  expectSameFloats(floatsOf(Out[1]), {-5, 0.5f, 2, NaN, 2, -Inf});
  expectSameFloats(floatsOf(Out[2]), {-5, 0.5f, 3, NaN, Inf, -Inf});
  EXPECT_EQ(elementsOf<int64_t>(Out[3]),
            (std::vector<int64_t>{-3, -3, 0, 4, 10}));
  EXPECT_EQ(elementsOf<int64_t>(Out[4]),
            (std::vector<int64_t>{-5, 0, 0, 2, 8}));
  EXPECT_EQ(elementsOf<uint8_t>(Out[5]),
            (std::vector<uint8_t>{0, 0, 0, 1, 0, 0}));
  EXPECT_EQ(elementsOf<uint8_t>(Out[6]),
            (std::vector<uint8_t>{0, 0, 0, 0, 1, 1}));
  EXPECT_EQ(elementsOf<uint8_t>(Out[7]),
            (std::vector<uint8_t>{0, 0, 0, 0, 1, 0}));
  EXPECT_EQ(elementsOf<uint8_t>(Out[8]),
            (std::vector<uint8_t>{0, 0, 0, 0, 0, 1}));
}

TEST(RuntimeMathKernels, BitwiseOpsAndShifts) {
  std::vector<HostTensor> Out = runProgram(
      R"(
graph @g(%a: i32[4], %b: i32[4], %u: u8[2, 3], %s: u8[3], %c: i64[2]) {
  %and = BitwiseAnd(%a, %b) : i32[4]
  %or = BitwiseOr(%a, %b) : i32[4]
  %xor = BitwiseXor(%a, %b) : i32[4]
  %not = BitwiseNot(%a) : i32[4]
  %unot = BitwiseNot(%u) : u8[2, 3]
  %cnot = BitwiseNot(%c) : i64[2]
  %left = BitShift(%u, %s) {direction = "LEFT"} : u8[2, 3]
  %right = BitShift(%u, %s) {direction = "RIGHT"} : u8[2, 3]
  %uand = BitwiseAnd(%u, %s) : u8[2, 3]
  return %and, %or, %xor, %not, %unot, %cnot, %left, %right, %uand
})",
      {i32({4}, {12, -1, 0x0F0F, -8}), i32({4}, {10, 5, 0x00FF, 3}),
       u8({2, 3}, {1, 200, 255, 16, 3, 129}), u8({3}, {1, 3, 8}),
       i64({2}, {0, -6})});
  ASSERT_EQ(Out.size(), 9u);
  EXPECT_EQ(elementsOf<int32_t>(Out[0]),
            (std::vector<int32_t>{8, 5, 0x000F, 0}));
  EXPECT_EQ(elementsOf<int32_t>(Out[1]),
            (std::vector<int32_t>{14, -1, 0x0FFF, -5}));
  EXPECT_EQ(elementsOf<int32_t>(Out[2]),
            (std::vector<int32_t>{6, -6, 0x0FF0, -5}));
  EXPECT_EQ(elementsOf<int32_t>(Out[3]),
            (std::vector<int32_t>{-13, 0, ~0x0F0F, 7}));
  EXPECT_EQ(elementsOf<uint8_t>(Out[4]),
            (std::vector<uint8_t>{254, 55, 0, 239, 252, 126}));
  EXPECT_EQ(elementsOf<int64_t>(Out[5]), (std::vector<int64_t>{-1, 5}));
  // Shifts by the width (8) or more give 0; bits shifted out are lost.
  EXPECT_EQ(elementsOf<uint8_t>(Out[6]),
            (std::vector<uint8_t>{2, 64, 0, 32, 24, 0}));
  EXPECT_EQ(elementsOf<uint8_t>(Out[7]),
            (std::vector<uint8_t>{0, 25, 0, 8, 0, 0}));
  EXPECT_EQ(elementsOf<uint8_t>(Out[8]),
            (std::vector<uint8_t>{1, 0, 8, 0, 3, 0}));
}

TEST(RuntimeMathKernels, ModPReluAndComparisons) {
  std::vector<HostTensor> Out = runProgram(
      R"(
graph @g(%a: i64[4], %b: i64[4], %x: f32[2, 3], %y: f32[3], %p: bool[4], %q: bool[4]) {
  %mod = Mod(%a, %b) : i64[4]
  %cmod = Mod(%a, %b) {fmod = 1} : i64[4]
  %fmod = Mod(%x, %y) {fmod = 1} : f32[2, 3]
  %prelu = PRelu(%x, %y) : f32[2, 3]
  %ge = GreaterOrEqual(%x, %y) : bool[2, 3]
  %le = LessOrEqual(%a, %b) : bool[4]
  %xor = Xor(%p, %q) : bool[4]
  return %mod, %cmod, %fmod, %prelu, %ge, %le, %xor
})",
      {i64({4}, {7, -7, 7, -7}), i64({4}, {3, 3, -3, -3}),
       f32({2, 3}, {5.5f, -5.5f, 2, -1, 0.5f, 3}), f32({3}, {2, 2, 0.5f}),
       boolean({4}, {0, 0, 1, 1}), boolean({4}, {0, 1, 0, 1})});
  ASSERT_EQ(Out.size(), 7u);
  // fmod = 0: the divisor's sign (Python); fmod = 1: the dividend's (C).
  EXPECT_EQ(elementsOf<int64_t>(Out[0]), (std::vector<int64_t>{1, 2, -2, -1}));
  EXPECT_EQ(elementsOf<int64_t>(Out[1]), (std::vector<int64_t>{1, -1, 1, -1}));
  expectNear(floatsOf(Out[2]), {1.5f, -1.5f, 0, -1, 0.5f, 0});
  // The slope [3] broadcasts along the rows of x.
  expectNear(floatsOf(Out[3]), {5.5f, -11, 2, -2, 0.5f, 3});
  EXPECT_EQ(elementsOf<uint8_t>(Out[4]),
            (std::vector<uint8_t>{1, 0, 1, 0, 0, 1}));
  EXPECT_EQ(elementsOf<uint8_t>(Out[5]), (std::vector<uint8_t>{0, 1, 0, 1}));
  EXPECT_EQ(elementsOf<uint8_t>(Out[6]), (std::vector<uint8_t>{0, 1, 1, 0}));

  std::string Error;
  runProgram(R"(
graph @g(%a: i64[2], %b: i64[2]) {
  %m = Mod(%a, %b) : i64[2] loc("mod")
  return %m
})",
             {i64({2}, {1, 2}), i64({2}, {1, 0})}, &Error);
  EXPECT_EQ(Error, "node 'mod' (Mod): integer Mod by zero (a divisor is 0)");
}

TEST(RuntimeMathKernels, VariadicMinMaxMean) {
  Random R(7);
  std::vector<float> A = R.vector(2 * 3), B = R.vector(3), C = R.vector(2 * 1);
  std::vector<HostTensor> Out = runProgram(
      R"(
graph @g(%a: f32[2, 3], %b: f32[3], %c: f32[2, 1], %n: f32[2], %i: i64[3], %j: i64[1]) {
  %min = Min(%a, %b, %c) : f32[2, 3]
  %max = Max(%a, %b, %c) : f32[2, 3]
  %mean = Mean(%a, %b, %c) : f32[2, 3]
  %one = Max(%a) : f32[2, 3]
  %nanmin = Min(%n, %n) : f32[2]
  %imax = Max(%i, %j) : i64[3]
  %imin = Min(%i, %j) : i64[3]
  return %min, %max, %mean, %one, %nanmin, %imax, %imin
})",
      {f32({2, 3}, A), f32({3}, B), f32({2, 1}, C), f32({2}, {NaN, 1}),
       i64({3}, {-4, 2, 9}), i64({1}, {3})});
  ASSERT_EQ(Out.size(), 7u);
  std::vector<float> Min, Max, Mean;
  for (int I = 0; I != 2; ++I)
    for (int J = 0; J != 3; ++J) {
      float P = A[I * 3 + J], Q = B[J], S = C[I];
      Min.push_back(std::min({P, Q, S}));
      Max.push_back(std::max({P, Q, S}));
      Mean.push_back(float((double(P) + Q + S) / 3));
    }
  expectNear(floatsOf(Out[0]), Min, 0);
  expectNear(floatsOf(Out[1]), Max, 0);
  expectNear(floatsOf(Out[2]), Mean, 1e-6f);
  expectNear(floatsOf(Out[3]), A, 0);
  expectSameFloats(floatsOf(Out[4]), {NaN, 1});
  EXPECT_EQ(elementsOf<int64_t>(Out[5]), (std::vector<int64_t>{3, 3, 9}));
  EXPECT_EQ(elementsOf<int64_t>(Out[6]), (std::vector<int64_t>{-4, 2, 3}));
}

TEST(RuntimeMathKernels, Reductions) {
  // x = [[1, -2, 3], [-4, 5, 0.5]].
  std::vector<float> X = {1, -2, 3, -4, 5, 0.5f};
  std::vector<HostTensor> Out = runProgram(
      R"(
graph @g(%x: f32[2, 3], %big: f32[2], %n: i64[2, 2]) {
  %axis1 = Constant() {value = dense<i64[1], [1]>} : i64[1]
  %prod = ReduceProd(%x, %axis1) : f32[2, 1]
  %min = ReduceMin(%x) {keepdims = 0} : f32[]
  %l1 = ReduceL1(%x) {axes = [0]} : f32[1, 3]
  %l2 = ReduceL2(%x, %axis1) {keepdims = 0} : f32[2]
  %abs = Abs(%x) : f32[2, 3]
  %logsum = ReduceLogSum(%abs) {axes = [1], keepdims = 0} : f32[2]
  %lse = ReduceLogSumExp(%x) {axes = [1], keepdims = 0} : f32[2]
  %lsebig = ReduceLogSumExp(%big) {keepdims = 0} : f32[]
  %sumsq = ReduceSumSquare(%x) {axes = [-1], keepdims = 0} : f32[2]
  %iprod = ReduceProd(%n) {axes = [0], keepdims = 0} : i64[2]
  %imin = ReduceMin(%n) {axes = [1], keepdims = 0} : i64[2]
  %il1 = ReduceL1(%n) {keepdims = 0} : i64[]
  %isq = ReduceSumSquare(%n) {axes = [1], keepdims = 0} : i64[2]
  return %prod, %min, %l1, %l2, %logsum, %lse, %lsebig, %sumsq, %iprod, %imin, %il1, %isq
})",
      {f32({2, 3}, X), f32({2}, {1000, 1000}), i64({2, 2}, {3, -2, -5, 4})});
  ASSERT_EQ(Out.size(), 12u);
  expectNear(floatsOf(Out[0]), {-6, -10});
  expectNear(floatsOf(Out[1]), {-4});
  expectNear(floatsOf(Out[2]), {5, 7, 3.5f});
  expectNear(floatsOf(Out[3]),
             {float(std::sqrt(14.0)), float(std::sqrt(41.25))});
  expectNear(floatsOf(Out[4]), {float(std::log(6.0)), float(std::log(9.5))});
  expectNear(floatsOf(Out[5]),
             {float(std::log(std::exp(1.0) + std::exp(-2.0) + std::exp(3.0))),
              float(std::log(std::exp(-4.0) + std::exp(5.0) + std::exp(0.5)))});
  // The maximum is subtracted first: no overflow of exp(1000).
  expectNear(floatsOf(Out[6]), {float(1000 + std::log(2.0))}, 1e-3f);
  expectNear(floatsOf(Out[7]), {14, 41.25f});
  EXPECT_EQ(elementsOf<int64_t>(Out[8]), (std::vector<int64_t>{-15, -8}));
  EXPECT_EQ(elementsOf<int64_t>(Out[9]), (std::vector<int64_t>{-2, -5}));
  EXPECT_EQ(elementsOf<int64_t>(Out[10]), (std::vector<int64_t>{14}));
  EXPECT_EQ(elementsOf<int64_t>(Out[11]), (std::vector<int64_t>{13, 41}));

  std::string Error;
  runProgram(R"(
graph @g(%n: i64[2]) {
  %l2 = ReduceL2(%n) : i64[1] loc("l2")
  return %l2
})",
             {i64({2}, {3, 4})}, &Error);
  EXPECT_EQ(
      Error,
      "node 'l2' (ReduceL2): operand 0 is i64[2]; the CPU kernel takes f32");
}

TEST(RuntimeMathKernels, EmptyReductionsGiveTheirIdentity) {
  std::vector<HostTensor> Out = runProgram(R"(
graph @g(%x: f32[2, 0]) {
  %prod = ReduceProd(%x) {axes = [1], keepdims = 0} : f32[2]
  %min = ReduceMin(%x) {axes = [1], keepdims = 0} : f32[2]
  %l2 = ReduceL2(%x) {axes = [1], keepdims = 0} : f32[2]
  %logsum = ReduceLogSum(%x) {axes = [1], keepdims = 0} : f32[2]
  return %prod, %min, %l2, %logsum
})",
                                           {f32({2, 0}, {})});
  ASSERT_EQ(Out.size(), 4u);
  expectSameFloats(floatsOf(Out[0]), {1, 1});
  expectSameFloats(floatsOf(Out[1]), {Inf, Inf});
  expectSameFloats(floatsOf(Out[2]), {0, 0});
  expectSameFloats(floatsOf(Out[3]), {-Inf, -Inf});
}

TEST(RuntimeMathKernels, ArgMaxArgMinAndHardmax) {
  // x = [[3, 1, 3], [0, 7, -2]] with a tie in row 0.
  std::vector<HostTensor> Out = runProgram(
      R"(
graph @g(%x: f32[2, 3], %n: i64[2, 3], %nan: f32[4]) {
  %amax = ArgMax(%x) {axis = 1} : i64[2, 1]
  %alast = ArgMax(%x) {axis = 1, keepdims = 0, select_last_index = 1} : i64[2]
  %amin0 = ArgMin(%x) {keepdims = 0} : i64[3]
  %imin = ArgMin(%n) {axis = -1, keepdims = 0, select_last_index = 1} : i64[2]
  %anan = ArgMax(%nan) {keepdims = 0} : i64[]
  %hard = Hardmax(%x) : f32[2, 3]
  %hard0 = Hardmax(%x) {axis = 0} : f32[2, 3]
  return %amax, %alast, %amin0, %imin, %anan, %hard, %hard0
})",
      {f32({2, 3}, {3, 1, 3, 0, 7, -2}), i64({2, 3}, {4, -1, -1, 2, 2, 2}),
       f32({4}, {1, NaN, 5, NaN})});
  ASSERT_EQ(Out.size(), 7u);
  EXPECT_EQ(elementsOf<int64_t>(Out[0]), (std::vector<int64_t>{0, 1}));
  EXPECT_EQ(elementsOf<int64_t>(Out[1]), (std::vector<int64_t>{2, 1}));
  EXPECT_EQ(elementsOf<int64_t>(Out[2]), (std::vector<int64_t>{1, 0, 1}));
  EXPECT_EQ(elementsOf<int64_t>(Out[3]), (std::vector<int64_t>{2, 2}));
  // A NaN is the maximum, the first one's index (numpy's argmax).
  EXPECT_EQ(elementsOf<int64_t>(Out[4]), (std::vector<int64_t>{1}));
  expectNear(floatsOf(Out[5]), {1, 0, 0, 0, 1, 0}, 0);
  expectNear(floatsOf(Out[6]), {1, 0, 1, 0, 1, 0}, 0);
}

} // namespace
