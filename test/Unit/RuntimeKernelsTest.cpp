//===- RuntimeKernelsTest.cpp - The CPU kernels ---------------------------===//
//
// Each kernel runs in a one-node program on the CPU backend and is compared
// with a naive reference computed here (loops in f64) or with values worked
// out by hand.
//
//===----------------------------------------------------------------------===//

#include "RuntimeTestSupport.h"

#include <cmath>

using namespace autopar;
using namespace autopar::test;

namespace {

TEST(RuntimeKernels, BroadcastAdd) {
  Random R(1);
  std::vector<float> A = R.vector(2 * 1 * 3), B = R.vector(4 * 1);
  std::vector<HostTensor> Out = runProgram(R"(
graph @g(%a: f32[2, 1, 3], %b: f32[4, 1]) {
  %c = Add(%a, %b) : f32[2, 4, 3]
  return %c
})",
                                           {f32({2, 1, 3}, A), f32({4, 1}, B)});
  ASSERT_EQ(Out.size(), 1u);
  std::vector<float> Expected;
  for (int I = 0; I != 2; ++I)
    for (int J = 0; J != 4; ++J)
      for (int K = 0; K != 3; ++K)
        Expected.push_back(A[I * 3 + K] + B[J]);
  expectNear(floatsOf(Out[0]), Expected, 0);
}

TEST(RuntimeKernels, ArithmeticAndComparisons) {
  std::vector<HostTensor> Out = runProgram(
      R"(
graph @g(%a: i64[4], %b: f32[2, 2]) {
  %two = Constant() {value = dense<i64[], [-3]>} : i64[]
  %q = Div(%a, %two) : i64[4]
  %p = Pow(%b, %two) : f32[2, 2]
  %s = Sub(%b, %b) : f32[2, 2]
  %l = Less(%a, %two) : bool[4]
  %w = Where(%l, %a, %q) : i64[4]
  return %q, %p, %s, %l, %w
})",
      {i64({4}, {7, -7, 1, -9}), f32({2, 2}, {1, 2, -2, 0.5f})});
  ASSERT_EQ(Out.size(), 5u);
  EXPECT_EQ(elementsOf<int64_t>(Out[0]), (std::vector<int64_t>{-2, 2, 0, 3}));
  expectNear(floatsOf(Out[1]), {1, 0.125f, -0.125f, 8});
  expectNear(floatsOf(Out[2]), {0, 0, 0, 0}, 0);
  EXPECT_EQ(elementsOf<uint8_t>(Out[3]), (std::vector<uint8_t>{0, 1, 0, 1}));
  EXPECT_EQ(elementsOf<int64_t>(Out[4]), (std::vector<int64_t>{-2, -7, 0, -9}));

  std::string Error;
  runProgram(R"(
graph @g(%a: i64[2], %b: i64[2]) {
  %q = Div(%a, %b) : i64[2] loc("div")
  return %q
})",
             {i64({2}, {1, 2}), i64({2}, {1, 0})}, &Error);
  EXPECT_EQ(Error, "node 'div' (Div): integer division by zero");
}

/// C[M, N] = Alpha * op(A) op(B) + Beta * Bias[N], in f64.
std::vector<float> naiveGemm(const std::vector<float> &A,
                             const std::vector<float> &B,
                             const std::vector<float> &Bias, int M, int N,
                             int K, bool TransA, bool TransB, double Alpha,
                             double Beta) {
  std::vector<float> C(M * N);
  for (int I = 0; I != M; ++I)
    for (int J = 0; J != N; ++J) {
      double Sum = 0;
      for (int P = 0; P != K; ++P)
        Sum += double(TransA ? A[P * M + I] : A[I * K + P]) *
               (TransB ? B[J * K + P] : B[P * N + J]);
      C[I * N + J] = float(Alpha * Sum + (Bias.empty() ? 0 : Beta * Bias[J]));
    }
  return C;
}

TEST(RuntimeKernels, GemmWithTransposes) {
  Random R(2);
  const int M = 3, N = 5, K = 4;
  std::vector<float> A = R.vector(K * M), B = R.vector(N * K), C = R.vector(N);
  std::vector<HostTensor> Out = runProgram(
      R"(
graph @g(%a: f32[4, 3], %b: f32[5, 4], %c: f32[5]) {
  %y = Gemm(%a, %b, %c) {alpha = 0.5, beta = 2.0, transA = 1, transB = 1} : f32[3, 5]
  %z = Gemm(%a, %b, _) {transA = 1, transB = 1} : f32[3, 5]
  return %y, %z
})",
      {f32({K, M}, A), f32({N, K}, B), f32({N}, C)});
  ASSERT_EQ(Out.size(), 2u);
  expectNear(floatsOf(Out[0]),
             naiveGemm(A, B, C, M, N, K, true, true, 0.5, 2.0));
  expectNear(floatsOf(Out[1]), naiveGemm(A, B, {}, M, N, K, true, true, 1, 0));
}

TEST(RuntimeKernels, MatMulBatchesAndLinear) {
  Random R(3);
  std::vector<float> X = R.vector(2 * 3 * 4), W = R.vector(3 * 4 * 5),
                     B = R.vector(5), W2 = R.vector(4 * 5);
  std::vector<HostTensor> Out = runProgram(
      R"(
graph @g(%x: f32[2, 1, 3, 4], %w: f32[3, 4, 5], %w2: f32[4, 5], %b: f32[5]) {
  %y = MatMul(%x, %w) : f32[2, 3, 3, 5]
  %l = Linear(%x, %w2, %b) : f32[2, 1, 3, 5]
  return %y, %l
})",
      {f32({2, 1, 3, 4}, X), f32({3, 4, 5}, W), f32({4, 5}, W2), f32({5}, B)});
  ASSERT_EQ(Out.size(), 2u);
  std::vector<float> Expected;
  for (int Batch = 0; Batch != 2; ++Batch)
    for (int Head = 0; Head != 3; ++Head) {
      std::vector<float> XM(X.begin() + Batch * 12,
                            X.begin() + Batch * 12 + 12);
      std::vector<float> WM(W.begin() + Head * 20, W.begin() + Head * 20 + 20);
      std::vector<float> C = naiveGemm(XM, WM, {}, 3, 5, 4, false, false, 1, 0);
      Expected.insert(Expected.end(), C.begin(), C.end());
    }
  expectNear(floatsOf(Out[0]), Expected);
  expectNear(floatsOf(Out[1]),
             naiveGemm(X, W2, B, 6, 5, 4, false, false, 1, 1));
}

TEST(RuntimeKernels, LayerNormalization) {
  Random R(4);
  std::vector<float> X = R.vector(2 * 3 * 4), Scale = R.vector(4),
                     Bias = R.vector(3 * 4);
  std::vector<HostTensor> Out = runProgram(
      R"(
graph @g(%x: f32[2, 3, 4], %s: f32[4], %b: f32[3, 4]) {
  %y, %mean, %inv = LayerNormalization(%x, %s, %b) {axis = 1, epsilon = 0.001} : f32[2, 3, 4], f32[2, 1, 1], f32[2, 1, 1]
  return %y, %mean, %inv
})",
      {f32({2, 3, 4}, X), f32({4}, Scale), f32({3, 4}, Bias)});
  ASSERT_EQ(Out.size(), 3u);
  std::vector<float> Y, Means, Invs;
  for (int Row = 0; Row != 2; ++Row) {
    double Mean = 0, Var = 0;
    for (int J = 0; J != 12; ++J)
      Mean += X[Row * 12 + J] / 12.0;
    for (int J = 0; J != 12; ++J)
      Var += (X[Row * 12 + J] - Mean) * (X[Row * 12 + J] - Mean) / 12.0;
    double Inv = 1 / std::sqrt(Var + 0.001);
    for (int J = 0; J != 12; ++J)
      Y.push_back(
          float((X[Row * 12 + J] - Mean) * Inv * Scale[J % 4] + Bias[J]));
    Means.push_back(float(Mean));
    Invs.push_back(float(Inv));
  }
  expectNear(floatsOf(Out[0]), Y);
  expectNear(floatsOf(Out[1]), Means);
  expectNear(floatsOf(Out[2]), Invs, 1e-4f);
}

TEST(RuntimeKernels, RMSNormalization) {
  Random R(5);
  std::vector<float> X = R.vector(3 * 8), Scale = R.vector(8);
  std::vector<HostTensor> Out = runProgram(R"(
graph @g(%x: f32[3, 8], %s: f32[8]) {
  %y = RMSNormalization(%x, %s) {epsilon = 1e-06} : f32[3, 8]
  return %y
})",
                                           {f32({3, 8}, X), f32({8}, Scale)});
  ASSERT_EQ(Out.size(), 1u);
  std::vector<float> Y;
  for (int Row = 0; Row != 3; ++Row) {
    double Squares = 0;
    for (int J = 0; J != 8; ++J)
      Squares += double(X[Row * 8 + J]) * X[Row * 8 + J];
    double Inv = 1 / std::sqrt(Squares / 8 + 1e-6);
    for (int J = 0; J != 8; ++J)
      Y.push_back(float(X[Row * 8 + J] * Inv * Scale[J]));
  }
  expectNear(floatsOf(Out[0]), Y);
}

TEST(RuntimeKernels, SoftmaxAndLogSoftmax) {
  std::vector<HostTensor> Out =
      runProgram(R"(
graph @g(%x: f32[2, 3]) {
  %s = Softmax(%x) {axis = 0} : f32[2, 3]
  %l = LogSoftmax(%x) : f32[2, 3]
  return %s, %l
})",
                 {f32({2, 3}, {1, 2, 3, 1, 0, 1003})});
  ASSERT_EQ(Out.size(), 2u);
  double E1 = std::exp(1.0), E2 = std::exp(2.0);
  expectNear(floatsOf(Out[0]),
             {0.5f, float(E2 / (E2 + 1)), 0, 0.5f, float(1 / (E2 + 1)), 1});
  double L = std::log(E1 + E2 + std::exp(3.0));
  expectNear(floatsOf(Out[1]),
             {float(1 - L), float(2 - L), float(3 - L), -1002, -1003, 0},
             1e-4f);
}

/// Attention over [B, Hq, S, D] queries and [B, Hkv, T, D|Dv] keys and
/// values, in f64: query head h uses key/value head h / (Hq / Hkv). Bias
/// gives each score's additive bias (-inf masks).
template <typename BiasFn>
std::vector<float>
naiveAttention(const std::vector<float> &Q, const std::vector<float> &K,
               const std::vector<float> &V, int B, int Hq, int Hkv, int S,
               int T, int D, int Dv, double Scale, BiasFn Bias) {
  std::vector<float> Y;
  for (int Bi = 0; Bi != B; ++Bi)
    for (int H = 0; H != Hq; ++H) {
      int KH = H / (Hq / Hkv);
      for (int I = 0; I != S; ++I) {
        std::vector<double> P(T);
        double Max = -INFINITY, Sum = 0;
        for (int J = 0; J != T; ++J) {
          double Dot = 0;
          for (int X = 0; X != D; ++X)
            Dot += double(Q[((Bi * Hq + H) * S + I) * D + X]) *
                   K[((Bi * Hkv + KH) * T + J) * D + X];
          P[J] = Dot * Scale + Bias(Bi, H, I, J);
          Max = std::max(Max, P[J]);
        }
        for (double &X : P)
          Sum += X = std::exp(X - Max);
        for (int X = 0; X != Dv; ++X) {
          double Out = 0;
          for (int J = 0; J != T; ++J)
            Out += P[J] / Sum * V[((Bi * Hkv + KH) * T + J) * Dv + X];
          Y.push_back(float(Out));
        }
      }
    }
  return Y;
}

TEST(RuntimeKernels, CausalAttention) {
  Random R(6);
  const int B = 2, H = 2, S = 5, D = 4;
  std::vector<float> Q = R.vector(B * H * S * D), K = R.vector(B * H * S * D),
                     V = R.vector(B * H * S * D);
  std::vector<HostTensor> Out = runProgram(
      R"(
graph @g(%q: f32[2, 2, 5, 4], %k: f32[2, 2, 5, 4], %v: f32[2, 2, 5, 4]) {
  %y = Attention(%q, %k, %v) {is_causal = 1} : f32[2, 2, 5, 4]
  return %y
})",
      {f32({B, H, S, D}, Q), f32({B, H, S, D}, K), f32({B, H, S, D}, V)});
  ASSERT_EQ(Out.size(), 1u);
  expectNear(floatsOf(Out[0]), naiveAttention(Q, K, V, B, H, H, S, S, D, D, 0.5,
                                              [](int, int, int I, int J) {
                                                return J > I ? -INFINITY : 0.0;
                                              }));
}

// The kernels that split their work over threads (norms and their
// gradients, attention, GELU, transposes, bias-gradient sums, same-shape
// arithmetic) give the same bits on 1 and 2 threads.
TEST(RuntimeKernels, ResultsDoNotDependOnTheThreadCount) {
  // Large enough that each kernel splits: 8 outer indices of the transpose,
  // 96 query rows in causal blocks, 12 chunks of the Add, 2 column blocks of
  // the ReduceSum, 1536 norm rows.
  Random R(8);
  std::string Text = R"(
graph @g(%x: f32[8, 96, 2, 64], %w: f32[512], %b: f32[512], %dy: f32[1536, 512]) {
  %shape = Constant() {value = dense<i64[2], [1536, 64]>} : i64[2]
  %t = Transpose(%x) {perm = [0, 2, 1, 3]} : f32[8, 2, 96, 64]
  %y = Attention(%t, %t, %t) {is_causal = 1} : f32[8, 2, 96, 64]
  %s = Reshape(%y, %shape) : f32[1536, 64]
  %c = Concat(%s, %s, %s, %s, %s, %s, %s, %s) {axis = 1} : f32[1536, 512]
  %n = LayerNormalization(%c, %w, %b) : f32[1536, 512]
  %g = Gelu(%n) : f32[1536, 512]
  %a = Add(%g, %dy) : f32[1536, 512]
  %m = Mul(%a, %a) : f32[1536, 512]
  %r = ReduceSum(%m) {axes = [0], keepdims = 0} : f32[512]
  %dx, %dw, %db = LayerNormalizationGrad(%dy, %c, %w) : f32[1536, 512], f32[512], f32[512]
  return %m, %r, %dx, %dw, %db, %t
}
)";
  std::vector<HostTensor> In = {
      f32({8, 96, 2, 64}, R.vector(8 * 96 * 2 * 64)), f32({512}, R.vector(512)),
      f32({512}, R.vector(512)), f32({1536, 512}, R.vector(1536 * 512))};
  std::vector<HostTensor> One = runProgram(Text, In, nullptr, true, 1);
  std::vector<HostTensor> Two = runProgram(Text, In, nullptr, true, 2);
  ASSERT_EQ(One.size(), 6u);
  ASSERT_EQ(Two.size(), 6u);
  for (size_t I = 0; I != One.size(); ++I)
    EXPECT_EQ(One[I].Bytes, Two[I].Bytes) << "output " << I;
  // And the split kernels are right: the transpose moves every element,
  // the column sums are the sums.
  std::vector<float> X = floatsOf(In[0]), T = floatsOf(One[5]);
  for (int B = 0; B != 8; ++B)
    for (int S = 0; S != 96; ++S)
      for (int H = 0; H != 2; ++H)
        for (int D = 0; D != 64; ++D)
          ASSERT_EQ(T[((B * 2 + H) * 96 + S) * 64 + D],
                    X[((B * 96 + S) * 2 + H) * 64 + D]);
  std::vector<float> M = floatsOf(One[0]), Sums = floatsOf(One[1]);
  for (int J = 0; J != 512; ++J) {
    double Want = 0;
    for (int Row = 0; Row != 1536; ++Row)
      Want += M[Row * 512 + J];
    EXPECT_NEAR(Sums[J], Want, 1e-5 * std::fabs(Want)) << "column " << J;
  }
}

// Sequence 70 takes three causal blocks of query rows (32, 32, 6), whose
// products leave out the keys after each block's last row.
TEST(RuntimeKernels, CausalAttentionOverSeveralBlocks) {
  Random R(7);
  const int B = 1, H = 2, S = 70, D = 4;
  std::vector<float> Q = R.vector(B * H * S * D), K = R.vector(B * H * S * D),
                     V = R.vector(B * H * S * D);
  std::vector<HostTensor> Out = runProgram(
      R"(
graph @g(%q: f32[1, 2, 70, 4], %k: f32[1, 2, 70, 4], %v: f32[1, 2, 70, 4]) {
  %y = Attention(%q, %k, %v) {is_causal = 1} : f32[1, 2, 70, 4]
  return %y
})",
      {f32({B, H, S, D}, Q), f32({B, H, S, D}, K), f32({B, H, S, D}, V)});
  ASSERT_EQ(Out.size(), 1u);
  expectNear(floatsOf(Out[0]), naiveAttention(Q, K, V, B, H, H, S, S, D, D, 0.5,
                                              [](int, int, int I, int J) {
                                                return J > I ? -INFINITY : 0.0;
                                              }));
}

TEST(RuntimeKernels, AttentionDropoutWithoutAStreamIsAnError) {
  // fuse-attention folds a training-mode Dropout into the ratio; without
  // the random stream dropout-streams gives it, running it is an error,
  // not a silent identity.
  std::string Error;
  std::vector<float> X(16, 0.5f);
  runProgram(R"(
graph @g(%q: f32[1, 1, 4, 4]) {
  %y = Attention(%q, %q, %q) {dropout = 0.1} : f32[1, 1, 4, 4]
  return %y
})",
             {f32({1, 1, 4, 4}, X)}, &Error);
  EXPECT_NE(Error.find("attention dropout without a random stream"),
            std::string::npos)
      << Error;
}

TEST(RuntimeKernels, GroupedQueryAttentionWithMasks) {
  Random R(7);
  const int B = 1, Hq = 4, Hkv = 2, S = 3, T = 4, D = 2, Dv = 3;
  std::vector<float> Q = R.vector(B * Hq * S * D),
                     K = R.vector(B * Hkv * T * D),
                     V = R.vector(B * Hkv * T * Dv), FloatMask = R.vector(T);
  // A bool mask [S, 3] (padded to T keys) and a float mask [T].
  std::vector<uint8_t> BoolMask = {1, 0, 1, 1, 1, 1, 0, 1, 1};
  std::vector<HostTensor> Out = runProgram(
      R"(
graph @g(%q: f32[1, 4, 3, 2], %k: f32[1, 2, 4, 2], %v: f32[1, 2, 4, 3], %bm: bool[3, 3], %fm: f32[4]) {
  %y = Attention(%q, %k, %v, %bm) {scale = 0.7} : f32[1, 4, 3, 3]
  %z = Attention(%q, %k, %v, %fm) {is_causal = 1} : f32[1, 4, 3, 3]
  return %y, %z
})",
      {f32({B, Hq, S, D}, Q), f32({B, Hkv, T, D}, K), f32({B, Hkv, T, Dv}, V),
       boolean({S, 3}, BoolMask), f32({T}, FloatMask)});
  ASSERT_EQ(Out.size(), 2u);
  expectNear(floatsOf(Out[0]),
             naiveAttention(Q, K, V, B, Hq, Hkv, S, T, D, Dv, 0.7,
                            [&](int, int, int I, int J) {
                              return J < 3 && BoolMask[I * 3 + J] ? 0.0
                                                                  : -INFINITY;
                            }));
  expectNear(floatsOf(Out[1]),
             naiveAttention(Q, K, V, B, Hq, Hkv, S, T, D, Dv,
                            1 / std::sqrt(2.0), [&](int, int, int I, int J) {
                              return J > I ? -INFINITY : double(FloatMask[J]);
                            }));
}

TEST(RuntimeKernels, ThreeDimensionalAttentionMatchesFourDimensional) {
  Random R(8);
  // [B, S, H * D] with 2 query heads and 1 key/value head of size 2.
  std::vector<float> Q = R.vector(1 * 3 * 4), K = R.vector(1 * 3 * 2),
                     V = R.vector(1 * 3 * 2);
  std::vector<HostTensor> Out = runProgram(
      R"(
graph @g(%q: f32[1, 3, 4], %k: f32[1, 3, 2], %v: f32[1, 3, 2]) {
  %y = Attention(%q, %k, %v) {is_causal = 1, kv_num_heads = 1, q_num_heads = 2} : f32[1, 3, 4]
  return %y
})",
      {f32({1, 3, 4}, Q), f32({1, 3, 2}, K), f32({1, 3, 2}, V)});
  ASSERT_EQ(Out.size(), 1u);
  // The same in [B, H, S, D]: Q's heads are its column halves.
  std::vector<float> Q4;
  for (int H = 0; H != 2; ++H)
    for (int S = 0; S != 3; ++S)
      for (int X = 0; X != 2; ++X)
        Q4.push_back(Q[S * 4 + H * 2 + X]);
  std::vector<float> Y4 = naiveAttention(
      Q4, K, V, 1, 2, 1, 3, 3, 2, 2, 1 / std::sqrt(2.0),
      [](int, int, int I, int J) { return J > I ? -INFINITY : 0.0; });
  std::vector<float> Expected;
  for (int S = 0; S != 3; ++S)
    for (int H = 0; H != 2; ++H)
      for (int X = 0; X != 2; ++X)
        Expected.push_back(Y4[(H * 3 + S) * 2 + X]);
  expectNear(floatsOf(Out[0]), Expected);
}

TEST(RuntimeKernels, RotaryEmbedding) {
  Random R(9);
  const int B = 1, H = 2, S = 3, D = 4, MaxPos = 8;
  std::vector<float> X = R.vector(B * H * S * D);
  std::vector<float> Cos, Sin;
  double Theta[2] = {1.0, 0.01};
  for (int P = 0; P != MaxPos; ++P)
    for (double T : Theta) {
      Cos.push_back(float(std::cos(P * T)));
      Sin.push_back(float(std::sin(P * T)));
    }
  std::vector<int64_t> Positions = {5, 0, 2};
  std::vector<HostTensor> Out = runProgram(
      R"(
graph @g(%x: f32[1, 2, 3, 4], %cos: f32[8, 2], %sin: f32[8, 2], %pos: i64[1, 3]) {
  %y = RotaryEmbedding(%x, %cos, %sin, %pos) : f32[1, 2, 3, 4]
  %z = RotaryEmbedding(%x, %cos, %sin, %pos) {interleaved = 1} : f32[1, 2, 3, 4]
  return %y, %z
})",
      {f32({B, H, S, D}, X), f32({MaxPos, 2}, Cos), f32({MaxPos, 2}, Sin),
       i64({1, S}, Positions)});
  ASSERT_EQ(Out.size(), 2u);
  // PyTorch's rotate-half form: x * [cos, cos] + [-x2, x1] * [sin, sin].
  std::vector<float> Half, Interleaved;
  for (int Hi = 0; Hi != H; ++Hi)
    for (int Si = 0; Si != S; ++Si) {
      const float *In = &X[(Hi * S + Si) * D];
      double C[2], Sn[2];
      for (int J = 0; J != 2; ++J) {
        C[J] = std::cos(Positions[Si] * Theta[J]);
        Sn[J] = std::sin(Positions[Si] * Theta[J]);
      }
      double Rotated[4] = {-In[2], -In[3], In[0], In[1]};
      for (int J = 0; J != 4; ++J)
        Half.push_back(float(In[J] * C[J % 2] + Rotated[J] * Sn[J % 2]));
      for (int J = 0; J != 2; ++J) {
        Interleaved.push_back(float(In[2 * J] * C[J] - In[2 * J + 1] * Sn[J]));
        Interleaved.push_back(float(In[2 * J] * Sn[J] + In[2 * J + 1] * C[J]));
      }
    }
  expectNear(floatsOf(Out[0]), Half);
  expectNear(floatsOf(Out[1]), Interleaved);
}

TEST(RuntimeKernels, Activations) {
  std::vector<float> X = {-2, -0.5f, 0, 1, 3};
  std::vector<HostTensor> Out = runProgram(R"(
graph @g(%x: f32[5]) {
  %e = Gelu(%x) : f32[5]
  %t = Gelu(%x) {approximate = "tanh"} : f32[5]
  %s = Silu(%x) : f32[5]
  %g = SwiGLU(%x, %x) : f32[5]
  return %e, %t, %s, %g
})",
                                           {f32({5}, X)});
  ASSERT_EQ(Out.size(), 4u);
  std::vector<float> Erf, Tanh, Silu, SwiGLU;
  for (double V : X) {
    Erf.push_back(float(0.5 * V * (1 + std::erf(V / std::sqrt(2.0)))));
    Tanh.push_back(float(
        0.5 * V *
        (1 + std::tanh(std::sqrt(2 / M_PI) * (V + 0.044715 * V * V * V)))));
    Silu.push_back(float(V / (1 + std::exp(-V))));
    SwiGLU.push_back(float(V * V / (1 + std::exp(-V))));
  }
  // Hand-checked: gelu(1) = 0.8413447, its tanh form 0.8411920.
  EXPECT_NEAR(Erf[3], 0.8413447f, 1e-6f);
  EXPECT_NEAR(Tanh[3], 0.8411920f, 1e-6f);
  expectNear(floatsOf(Out[0]), Erf);
  expectNear(floatsOf(Out[1]), Tanh);
  expectNear(floatsOf(Out[2]), Silu);
  expectNear(floatsOf(Out[3]), SwiGLU);
}

TEST(RuntimeKernels, Gather) {
  std::vector<HostTensor> Out = runProgram(
      R"(
graph @g(%x: f32[3, 2], %i: i64[2, 2]) {
  %rows = Gather(%x, %i) : f32[2, 2, 2]
  %cols = Gather(%x, %i) {axis = 1} : f32[3, 2, 2]
  return %rows, %cols
})",
      {f32({3, 2}, {0, 1, 10, 11, 20, 21}), i64({2, 2}, {1, 0, -1, 1})});
  ASSERT_EQ(Out.size(), 2u);
  expectNear(floatsOf(Out[0]), {10, 11, 0, 1, 20, 21, 10, 11}, 0);
  expectNear(floatsOf(Out[1]), {1, 0, 1, 1, 11, 10, 11, 11, 21, 20, 21, 21}, 0);

  std::string Error;
  runProgram(R"(
graph @g(%x: f32[3, 2], %i: i64[1]) {
  %rows = Gather(%x, %i) : f32[1, 2] loc("emb")
  return %rows
})",
             {f32({3, 2}, {0, 1, 2, 3, 4, 5}), i64({1}, {3})}, &Error);
  EXPECT_EQ(Error, "node 'emb' (Gather): index 3 is out of range for "
                   "dimension 0 of size 3");
}

TEST(RuntimeKernels, Transpose) {
  std::vector<float> X(24);
  for (int I = 0; I != 24; ++I)
    X[I] = float(I);
  std::vector<HostTensor> Out = runProgram(R"(
graph @g(%x: f32[2, 3, 4]) {
  %y = Transpose(%x) {perm = [2, 0, 1]} : f32[4, 2, 3]
  %z = Transpose(%x) : f32[4, 3, 2]
  return %y, %z
})",
                                           {f32({2, 3, 4}, X)});
  ASSERT_EQ(Out.size(), 2u);
  std::vector<float> Y, Z;
  for (int K = 0; K != 4; ++K)
    for (int I = 0; I != 2; ++I)
      for (int J = 0; J != 3; ++J)
        Y.push_back(X[(I * 3 + J) * 4 + K]);
  for (int K = 0; K != 4; ++K)
    for (int J = 0; J != 3; ++J)
      for (int I = 0; I != 2; ++I)
        Z.push_back(X[(I * 3 + J) * 4 + K]);
  expectNear(floatsOf(Out[0]), Y, 0);
  expectNear(floatsOf(Out[1]), Z, 0);
}

TEST(RuntimeKernels, Slice) {
  std::vector<float> X(20);
  for (int I = 0; I != 20; ++I)
    X[I] = float(I);
  std::vector<HostTensor> Out = runProgram(
      R"(
graph @g(%x: f32[4, 5], %starts: i64[2], %ends: i64[2], %axes: i64[2], %steps: i64[2]) {
  %y = Slice(%x, %starts, %ends, %axes, %steps) : f32[2, 2]
  return %y
})",
      {f32({4, 5}, X), i64({2}, {-1, 1}), i64({2}, {-1000, 1000}),
       i64({2}, {1, 0}), i64({2}, {-3, 2})},
      nullptr, /*Verify=*/true);
  ASSERT_EQ(Out.size(), 1u);
  // Rows 1 and 3; columns 4 and 1.
  expectNear(floatsOf(Out[0]), {9, 6, 19, 16}, 0);
}

TEST(RuntimeKernels, SplitAndConcat) {
  std::vector<float> X(12);
  for (int I = 0; I != 12; ++I)
    X[I] = float(I);
  std::vector<HostTensor> Out = runProgram(R"(
graph @g(%x: f32[2, 6]) {
  %sizes = Constant() {value = dense<i64[3], [1, 2, 3]>} : i64[3]
  %a, %b, %c = Split(%x, %sizes) {axis = 1} : f32[2, 1], f32[2, 2], f32[2, 3]
  %p, %q = Split(%x) {axis = 1, num_outputs = 2} : f32[2, 3], f32[2, 3]
  %r = Concat(%c, %a, %b) {axis = -1} : f32[2, 6]
  %s = Concat(%p, %q) {axis = 0} : f32[4, 3]
  return %a, %b, %c, %r, %s
})",
                                           {f32({2, 6}, X)});
  ASSERT_EQ(Out.size(), 5u);
  expectNear(floatsOf(Out[0]), {0, 6}, 0);
  expectNear(floatsOf(Out[1]), {1, 2, 7, 8}, 0);
  expectNear(floatsOf(Out[2]), {3, 4, 5, 9, 10, 11}, 0);
  expectNear(floatsOf(Out[3]), {3, 4, 5, 0, 1, 2, 9, 10, 11, 6, 7, 8}, 0);
  expectNear(floatsOf(Out[4]), {0, 1, 2, 6, 7, 8, 3, 4, 5, 9, 10, 11}, 0);
}

TEST(RuntimeKernels, Trilu) {
  std::vector<HostTensor> Out = runProgram(R"(
graph @g(%x: i64[2, 3]) {
  %k = Constant() {value = dense<i64[], [1]>} : i64[]
  %u = Trilu(%x, %k) : i64[2, 3]
  %l = Trilu(%x) {upper = 0} : i64[2, 3]
  return %u, %l
})",
                                           {i64({2, 3}, {1, 2, 3, 4, 5, 6})});
  ASSERT_EQ(Out.size(), 2u);
  EXPECT_EQ(elementsOf<int64_t>(Out[0]),
            (std::vector<int64_t>{0, 2, 3, 0, 0, 6}));
  EXPECT_EQ(elementsOf<int64_t>(Out[1]),
            (std::vector<int64_t>{1, 0, 0, 4, 5, 0}));
}

TEST(RuntimeKernels, ShapesReductionsAndCasts) {
  std::vector<HostTensor> Out = runProgram(
      R"(
graph @g(%x: f32[2, 3]) {
  %shape = Constant() {value = dense<i64[3], [0, 3, -1]>} : i64[3]
  %r = Reshape(%x, %shape) : f32[2, 3, 1]
  %axes = Constant() {value = dense<i64[1], [1]>} : i64[1]
  %u = Unsqueeze(%x, %axes) : f32[2, 1, 3]
  %sq = Squeeze(%u) : f32[2, 3]
  %to = Constant() {value = dense<i64[3], [2, 2, 3]>} : i64[3]
  %e = Expand(%u, %to) : f32[2, 2, 3]
  %sum = ReduceSum(%x, %axes) {keepdims = 0} : f32[2]
  %mean = ReduceMean(%x) : f32[1, 1]
  %c = Cast(%x) {to = "i64"} : i64[2, 3]
  %h = Cast(%x) {to = "f16"} : f16[2, 3]
  %hh = Add(%h, %h) : f16[2, 3]
  %f = Cast(%hh) {to = "f32"} : f32[2, 3]
  return %r, %sq, %e, %sum, %mean, %c, %f
})",
      {f32({2, 3}, {1.5f, -2.5f, 3, 4, 5, 6})});
  ASSERT_EQ(Out.size(), 7u);
  EXPECT_EQ(Out[0].Shape, (llvm::SmallVector<int64_t, 4>{2, 3, 1}));
  expectNear(floatsOf(Out[1]), {1.5f, -2.5f, 3, 4, 5, 6}, 0);
  expectNear(floatsOf(Out[2]),
             {1.5f, -2.5f, 3, 1.5f, -2.5f, 3, 4, 5, 6, 4, 5, 6}, 0);
  expectNear(floatsOf(Out[3]), {2, 15}, 0);
  expectNear(floatsOf(Out[4]), {17.0f / 6}, 1e-6f);
  EXPECT_EQ(elementsOf<int64_t>(Out[5]),
            (std::vector<int64_t>{1, -2, 3, 4, 5, 6}));
  expectNear(floatsOf(Out[6]), {3, -5, 6, 8, 10, 12}, 0);
}

TEST(RuntimeKernels, ResultShapesAreChecked) {
  // The verifier cannot know %shape, so the kernel's check is what fails.
  std::string Error;
  runProgram(R"(
graph @g(%x: f32[2, 3], %shape: i64[2]) {
  %r = Reshape(%x, %shape) : f32[6, 1] loc("flat")
  return %r
})",
             {f32({2, 3}, {1, 2, 3, 4, 5, 6}), i64({2}, {1, 6})}, &Error);
  EXPECT_EQ(Error, "node 'flat' (Reshape): result 0 has shape [1, 6] but the "
                   "program declares f32[6, 1]");
}

TEST(RuntimeKernels, MissingKernelNamesTheNode) {
  std::string Error;
  runProgram(R"(
graph @g(%x: f32[1, 1, 4, 4], %w: f32[1, 1, 3, 3]) {
  %y = ConvTranspose(%x, %w) : f32[1, 1, 6, 6] loc("deconv1")
  %z = ConvTranspose(%x, %w) : f32[1, 1, 6, 6]
  return %y, %z
})",
             {f32({1, 1, 4, 4}, std::vector<float>(16)),
              f32({1, 1, 3, 3}, std::vector<float>(9))},
             &Error);
  EXPECT_EQ(Error, "node 'deconv1' (ConvTranspose): no CPU kernel");
}

} // namespace
