//===- RuntimeConvKernelsTest.cpp - The CPU CNN kernels -------------------===//
//
// Conv, MaxPool, AveragePool, GlobalAveragePool, BatchNormalization and LRN
// run in one-node programs on the CPU backend and are compared with direct
// loops in f64 written here from the ONNX definitions (taps at output *
// stride - pad_begin + tap * dilation) or with values worked out by hand.
//
//===----------------------------------------------------------------------===//

#include "RuntimeTestSupport.h"

#include <cmath>
#include <limits>

using namespace autopar;
using namespace autopar::test;

namespace {

/// A 2-D window along one axis: kernel, stride, dilation, pads.
struct Axis {
  int64_t In, Kernel, Stride = 1, Dilation = 1, PadBegin = 0, PadEnd = 0;
  int64_t out(bool Ceil = false) const {
    int64_t Size = In + PadBegin + PadEnd - (Kernel - 1) * Dilation - 1;
    int64_t Out = (Ceil ? (Size + Stride - 1) / Stride : Size / Stride) + 1;
    if (Ceil && (Out - 1) * Stride >= In + PadBegin)
      --Out;
    return Out;
  }
  int64_t tap(int64_t O, int64_t K) const {
    return O * Stride - PadBegin + K * Dilation;
  }
};

/// Direct 2-D convolution of X [N, C, H, W] with Wt [M, C / Group, KH, KW]
/// and Bias [M] (or none).
std::vector<float> naiveConv2D(const std::vector<float> &X,
                               const std::vector<float> &Wt,
                               const std::vector<float> &Bias, int64_t N,
                               int64_t C, int64_t M, int64_t Group, Axis H,
                               Axis W) {
  int64_t CG = C / Group, MG = M / Group, OH = H.out(), OW = W.out();
  std::vector<float> Y;
  for (int64_t Img = 0; Img != N; ++Img)
    for (int64_t Out = 0; Out != M; ++Out)
      for (int64_t OY = 0; OY != OH; ++OY)
        for (int64_t OX = 0; OX != OW; ++OX) {
          double Sum = Bias.empty() ? 0 : Bias[Out];
          int64_t G = Out / MG;
          for (int64_t Ch = 0; Ch != CG; ++Ch)
            for (int64_t KY = 0; KY != H.Kernel; ++KY)
              for (int64_t KX = 0; KX != W.Kernel; ++KX) {
                int64_t IY = H.tap(OY, KY), IX = W.tap(OX, KX);
                if (IY < 0 || IY >= H.In || IX < 0 || IX >= W.In)
                  continue;
                Sum +=
                    double(
                        X[((Img * C + G * CG + Ch) * H.In + IY) * W.In + IX]) *
                    Wt[((Out * CG + Ch) * H.Kernel + KY) * W.Kernel + KX];
              }
          Y.push_back(float(Sum));
        }
  return Y;
}

TEST(RuntimeConvKernels, ConvGroupsDilationsPadsStrides) {
  Random R(11);
  // H: in 7, kernel 3, stride 2, dilation 2, pads 1 and 2 -> 3 outputs.
  // W: in 6, kernel 2, stride 1, pads 0 and 1 -> 6 outputs.
  Axis H{7, 3, 2, 2, 1, 2}, W{6, 2, 1, 1, 0, 1};
  ASSERT_EQ(H.out(), 3);
  ASSERT_EQ(W.out(), 6);
  std::vector<float> X = R.vector(2 * 4 * 7 * 6), Wt = R.vector(6 * 2 * 3 * 2),
                     B = R.vector(6);
  std::vector<HostTensor> Out = runProgram(
      R"(
graph @g(%x: f32[2, 4, 7, 6], %w: f32[6, 2, 3, 2], %b: f32[6]) {
  %y = Conv(%x, %w, %b) {dilations = [2, 1], group = 2, kernel_shape = [3, 2], pads = [1, 0, 2, 1], strides = [2, 1]} : f32[2, 6, 3, 6]
  %z = Conv(%x, %w, _) {dilations = [2, 1], group = 2, pads = [1, 0, 2, 1], strides = [2, 1]} : f32[2, 6, 3, 6]
  return %y, %z
})",
      {f32({2, 4, 7, 6}, X), f32({6, 2, 3, 2}, Wt), f32({6}, B)});
  ASSERT_EQ(Out.size(), 2u);
  expectNear(floatsOf(Out[0]), naiveConv2D(X, Wt, B, 2, 4, 6, 2, H, W));
  expectNear(floatsOf(Out[1]), naiveConv2D(X, Wt, {}, 2, 4, 6, 2, H, W));
}

TEST(RuntimeConvKernels, ConvDepthwiseAndPointwise) {
  Random R(12);
  std::vector<float> X = R.vector(1 * 3 * 5 * 5), Dw = R.vector(3 * 1 * 3 * 3),
                     Pw = R.vector(4 * 3 * 1 * 1), B = R.vector(4);
  std::vector<HostTensor> Out = runProgram(
      R"(
graph @g(%x: f32[1, 3, 5, 5], %dw: f32[3, 1, 3, 3], %pw: f32[4, 3, 1, 1], %b: f32[4]) {
  %d = Conv(%x, %dw) {group = 3, pads = [1, 1, 1, 1]} : f32[1, 3, 5, 5]
  %p = Conv(%x, %pw, %b) : f32[1, 4, 5, 5]
  return %d, %p
})",
      {f32({1, 3, 5, 5}, X), f32({3, 1, 3, 3}, Dw), f32({4, 3, 1, 1}, Pw),
       f32({4}, B)});
  ASSERT_EQ(Out.size(), 2u);
  expectNear(floatsOf(Out[0]),
             naiveConv2D(X, Dw, {}, 1, 3, 3, 3, Axis{5, 3, 1, 1, 1, 1},
                         Axis{5, 3, 1, 1, 1, 1}));
  expectNear(floatsOf(Out[1]),
             naiveConv2D(X, Pw, B, 1, 3, 4, 1, Axis{5, 1}, Axis{5, 1}));
}

TEST(RuntimeConvKernels, ConvAutoPadAndOneAndThreeDimensions) {
  Random R(13);
  // 1-D, in 8, kernel 3, stride 2: 4 outputs, one pad in total, at the end
  // for SAME_UPPER and at the beginning for SAME_LOWER; VALID has none.
  std::vector<float> X = R.vector(3 * 8), Wt = R.vector(2 * 3 * 3);
  std::vector<HostTensor> Out = runProgram(
      R"(
graph @g(%x: f32[1, 3, 8], %w: f32[2, 3, 3]) {
  %u = Conv(%x, %w) {auto_pad = "SAME_UPPER", strides = [2]} : f32[1, 2, 4]
  %l = Conv(%x, %w) {auto_pad = "SAME_LOWER", strides = [2]} : f32[1, 2, 4]
  %v = Conv(%x, %w) {auto_pad = "VALID", strides = [2]} : f32[1, 2, 3]
  return %u, %l, %v
})",
      {f32({1, 3, 8}, X), f32({2, 3, 3}, Wt)});
  ASSERT_EQ(Out.size(), 3u);
  // As 2-D convolutions with a height of 1.
  Axis One{1, 1};
  expectNear(floatsOf(Out[0]),
             naiveConv2D(X, Wt, {}, 1, 3, 2, 1, One, Axis{8, 3, 2, 1, 0, 1}));
  expectNear(floatsOf(Out[1]),
             naiveConv2D(X, Wt, {}, 1, 3, 2, 1, One, Axis{8, 3, 2, 1, 1, 0}));
  expectNear(floatsOf(Out[2]),
             naiveConv2D(X, Wt, {}, 1, 3, 2, 1, One, Axis{8, 3, 2}));

  // 3-D: X [1, 2, 3, 4, 3], W [2, 1, 2, 2, 2], group 2, pads 1 everywhere,
  // stride 2 along the last axis: Y [1, 2, 4, 5, 2].
  std::vector<float> X3 = R.vector(2 * 3 * 4 * 3), W3 = R.vector(2 * 2 * 2 * 2);
  Out = runProgram(
      R"(
graph @g(%x: f32[1, 2, 3, 4, 3], %w: f32[2, 1, 2, 2, 2]) {
  %y = Conv(%x, %w) {group = 2, pads = [1, 1, 1, 1, 1, 1], strides = [1, 1, 2]} : f32[1, 2, 4, 5, 2]
  return %y
})",
      {f32({1, 2, 3, 4, 3}, X3), f32({2, 1, 2, 2, 2}, W3)});
  ASSERT_EQ(Out.size(), 1u);
  std::vector<float> Expected;
  for (int64_t M = 0; M != 2; ++M)
    for (int64_t A = 0; A != 4; ++A)
      for (int64_t B = 0; B != 5; ++B)
        for (int64_t C = 0; C != 2; ++C) {
          double Sum = 0;
          for (int64_t KA = 0; KA != 2; ++KA)
            for (int64_t KB = 0; KB != 2; ++KB)
              for (int64_t KC = 0; KC != 2; ++KC) {
                int64_t IA = A - 1 + KA, IB = B - 1 + KB, IC = 2 * C - 1 + KC;
                if (IA < 0 || IA >= 3 || IB < 0 || IB >= 4 || IC < 0 || IC >= 3)
                  continue;
                Sum += double(X3[((M * 3 + IA) * 4 + IB) * 3 + IC]) *
                       W3[((M * 2 + KA) * 2 + KB) * 2 + KC];
              }
          Expected.push_back(float(Sum));
        }
  expectNear(floatsOf(Out[0]), Expected);
}

/// Direct 2-D pooling of X [Planes, H, W]: the max, or the average over
/// the taps inside X or (IncludePad) over the taps inside the padded input.
std::vector<float> naivePool2D(const std::vector<float> &X, int64_t Planes,
                               Axis H, Axis W, bool Ceil, bool Max,
                               bool IncludePad) {
  std::vector<float> Y;
  for (int64_t P = 0; P != Planes; ++P)
    for (int64_t OY = 0; OY != H.out(Ceil); ++OY)
      for (int64_t OX = 0; OX != W.out(Ceil); ++OX) {
        double Sum = 0, Best = -std::numeric_limits<double>::infinity();
        int64_t Inside = 0, Padded = 0;
        for (int64_t KY = 0; KY != H.Kernel; ++KY)
          for (int64_t KX = 0; KX != W.Kernel; ++KX) {
            int64_t IY = H.tap(OY, KY), IX = W.tap(OX, KX);
            if (IY < H.In + H.PadEnd && IX < W.In + W.PadEnd)
              ++Padded;
            if (IY < 0 || IY >= H.In || IX < 0 || IX >= W.In)
              continue;
            double V = X[(P * H.In + IY) * W.In + IX];
            Sum += V;
            Best = std::max(Best, V);
            ++Inside;
          }
        Y.push_back(float(Max ? Best : Sum / (IncludePad ? Padded : Inside)));
      }
  return Y;
}

TEST(RuntimeConvKernels, MaxPoolCeilModeDilationsAndIndices) {
  Random R(14);
  std::vector<float> X = R.vector(2 * 3 * 7 * 6);
  // H: in 7, kernel 2, stride 4, pads 1 and 0: (7 + 1 - 2) / 4 -> 2 outputs;
  // ceil_mode rounds 1.5 up to 3 windows but drops the last one, which would
  // start at 7, in the end padding. W: in 6, kernel 2, dilation 2, stride 2:
  // (6 - 3) / 2 -> 2 outputs, 3 in ceil_mode, the last window (taps 4 and 6)
  // reaching past the end.
  Axis H{7, 2, 4, 1, 1, 0}, W{6, 2, 2, 2, 0, 0};
  ASSERT_EQ(H.out(true), 2);
  ASSERT_EQ(H.out(false), 2);
  ASSERT_EQ(W.out(true), 3);
  ASSERT_EQ(W.out(false), 2);
  std::vector<HostTensor> Out = runProgram(
      R"(
graph @g(%x: f32[2, 3, 7, 6]) {
  %c = MaxPool(%x) {ceil_mode = 1, dilations = [1, 2], kernel_shape = [2, 2], pads = [1, 0, 0, 0], strides = [4, 2]} : f32[2, 3, 2, 3]
  %f = MaxPool(%x) {dilations = [1, 2], kernel_shape = [2, 2], pads = [1, 0, 0, 0], strides = [4, 2]} : f32[2, 3, 2, 2]
  return %c, %f
})",
      {f32({2, 3, 7, 6}, X)});
  ASSERT_EQ(Out.size(), 2u);
  expectNear(floatsOf(Out[0]), naivePool2D(X, 6, H, W, true, true, false), 0);
  expectNear(floatsOf(Out[1]), naivePool2D(X, 6, H, W, false, true, false), 0);

  // Indices by hand: X [1, 1, 2, 3] row-major, one 2x2 window at stride 1.
  Out = runProgram(R"(
graph @g(%x: f32[1, 1, 2, 3]) {
  %y, %i = MaxPool(%x) {kernel_shape = [2, 2]} : f32[1, 1, 1, 2], i64[1, 1, 1, 2]
  %z, %j = MaxPool(%x) {kernel_shape = [2, 2], storage_order = 1} : f32[1, 1, 1, 2], i64[1, 1, 1, 2]
  return %y, %i, %z, %j
})",
                   {f32({1, 1, 2, 3}, {1, 9, 2, 8, 3, 7})});
  ASSERT_EQ(Out.size(), 4u);
  expectNear(floatsOf(Out[0]), {9, 9}, 0);
  // 9 is at row 0, column 1: offset 1 row-major, 2 column-major.
  EXPECT_EQ(elementsOf<int64_t>(Out[1]), (std::vector<int64_t>{1, 1}));
  EXPECT_EQ(elementsOf<int64_t>(Out[3]), (std::vector<int64_t>{2, 2}));
}

TEST(RuntimeConvKernels, AveragePoolCountIncludePad) {
  // By hand, 1-D: X = 1..5, kernel 3, stride 2, pads 1 and 0, ceil_mode:
  // windows at -1, 1, 3: {pad, 1, 2}, {2, 3, 4}, {4, 5, past the end}.
  std::vector<HostTensor> Out = runProgram(R"(
graph @g(%x: f32[1, 1, 5]) {
  %e = AveragePool(%x) {ceil_mode = 1, kernel_shape = [3], pads = [1, 0], strides = [2]} : f32[1, 1, 3]
  %i = AveragePool(%x) {ceil_mode = 1, count_include_pad = 1, kernel_shape = [3], pads = [1, 0], strides = [2]} : f32[1, 1, 3]
  %f = AveragePool(%x) {count_include_pad = 1, kernel_shape = [3], pads = [1, 0], strides = [2]} : f32[1, 1, 2]
  return %e, %i, %f
})",
                                           {f32({1, 1, 5}, {1, 2, 3, 4, 5})});
  ASSERT_EQ(Out.size(), 3u);
  expectNear(floatsOf(Out[0]), {1.5f, 3, 4.5f});
  // The pad counts; the position past the end padding does not.
  expectNear(floatsOf(Out[1]), {1, 3, 4.5f});
  expectNear(floatsOf(Out[2]), {1, 3});

  // 2-D against the direct loop, both ways.
  Random R(15);
  std::vector<float> X = R.vector(2 * 2 * 6 * 5);
  Axis H{6, 3, 2, 1, 1, 1}, W{5, 2, 2, 1, 1, 0};
  ASSERT_EQ(H.out(), 3);
  ASSERT_EQ(W.out(), 3);
  Out = runProgram(R"(
graph @g(%x: f32[2, 2, 6, 5]) {
  %e = AveragePool(%x) {kernel_shape = [3, 2], pads = [1, 1, 1, 0], strides = [2, 2]} : f32[2, 2, 3, 3]
  %i = AveragePool(%x) {count_include_pad = 1, kernel_shape = [3, 2], pads = [1, 1, 1, 0], strides = [2, 2]} : f32[2, 2, 3, 3]
  %s = AveragePool(%x) {auto_pad = "SAME_UPPER", kernel_shape = [3, 2], strides = [2, 2]} : f32[2, 2, 3, 3]
  return %e, %i, %s
})",
                   {f32({2, 2, 6, 5}, X)});
  ASSERT_EQ(Out.size(), 3u);
  expectNear(floatsOf(Out[0]), naivePool2D(X, 4, H, W, false, false, false));
  expectNear(floatsOf(Out[1]), naivePool2D(X, 4, H, W, false, false, true));
  // SAME_UPPER: H pads 1 in total (0 and 1), W 1 (0 and 1).
  expectNear(floatsOf(Out[2]),
             naivePool2D(X, 4, Axis{6, 3, 2, 1, 0, 1}, Axis{5, 2, 2, 1, 0, 1},
                         false, false, false));
}

TEST(RuntimeConvKernels, GlobalAveragePoolAndBatchNorm) {
  Random R(16);
  std::vector<float> X = R.vector(2 * 3 * 2 * 2), Scale = R.vector(3),
                     B = R.vector(3), Mean = R.vector(3), Var = R.vector(3);
  for (float &V : Var)
    V = V * V + 0.1f;
  std::vector<HostTensor> Out = runProgram(
      R"(
graph @g(%x: f32[2, 3, 2, 2], %s: f32[3], %b: f32[3], %m: f32[3], %v: f32[3]) {
  %g = GlobalAveragePool(%x) : f32[2, 3, 1, 1]
  %n = BatchNormalization(%x, %s, %b, %m, %v) {epsilon = 0.01} : f32[2, 3, 2, 2]
  return %g, %n
})",
      {f32({2, 3, 2, 2}, X), f32({3}, Scale), f32({3}, B), f32({3}, Mean),
       f32({3}, Var)});
  ASSERT_EQ(Out.size(), 2u);
  std::vector<float> Means, Normed;
  for (int P = 0; P != 6; ++P) {
    double Sum = 0;
    for (int J = 0; J != 4; ++J) {
      float V = X[P * 4 + J];
      Sum += V;
      int C = P % 3;
      Normed.push_back(
          float((V - Mean[C]) / std::sqrt(Var[C] + 0.01) * Scale[C] + B[C]));
    }
    Means.push_back(float(Sum / 4));
  }
  expectNear(floatsOf(Out[0]), Means);
  expectNear(floatsOf(Out[1]), Normed);

  std::string Error;
  runProgram(R"(
graph @g(%x: f32[2, 3], %s: f32[3]) {
  %n = BatchNormalization(%x, %s, %s, %s, %s) {training_mode = 1} : f32[2, 3] loc("bn")
  return %n
})",
             {f32({2, 3}, R.vector(6)), f32({3}, {1, 1, 1})}, &Error);
  EXPECT_EQ(Error, "node 'bn' (BatchNormalization): training_mode 1 (batch "
                   "statistics) is not supported; the CPU kernel computes the "
                   "inference form");
}

TEST(RuntimeConvKernels, LRN) {
  Random R(17);
  std::vector<float> X = R.vector(2 * 5 * 2 * 3);
  std::vector<HostTensor> Out = runProgram(R"(
graph @g(%x: f32[2, 5, 2, 3]) {
  %a = LRN(%x) {alpha = 0.5, beta = 0.75, bias = 2.0, size = 3} : f32[2, 5, 2, 3]
  %b = LRN(%x) {size = 4} : f32[2, 5, 2, 3]
  return %a, %b
})",
                                           {f32({2, 5, 2, 3}, X)});
  ASSERT_EQ(Out.size(), 2u);
  // ONNX: channels [c - floor((size - 1) / 2), c + ceil((size - 1) / 2)].
  auto Reference = [&](int Size, double Alpha, double Beta, double Bias) {
    std::vector<float> Y;
    for (int N = 0; N != 2; ++N)
      for (int C = 0; C != 5; ++C)
        for (int J = 0; J != 6; ++J) {
          double Square = 0;
          for (int K = C - (Size - 1) / 2; K <= C + Size / 2; ++K)
            if (K >= 0 && K < 5)
              Square += double(X[(N * 5 + K) * 6 + J]) * X[(N * 5 + K) * 6 + J];
          Y.push_back(float(X[(N * 5 + C) * 6 + J] /
                            std::pow(Bias + Alpha / Size * Square, Beta)));
        }
    return Y;
  };
  expectNear(floatsOf(Out[0]), Reference(3, 0.5, 0.75, 2.0));
  expectNear(floatsOf(Out[1]), Reference(4, 1e-4, 0.75, 1.0));
  // Size 4 takes one channel before and two after: with a large alpha the
  // asymmetry shows.
  Out = runProgram(R"(
graph @g(%x: f32[1, 3, 1]) {
  %y = LRN(%x) {alpha = 4.0, beta = 1.0, bias = 1.0, size = 4} : f32[1, 3, 1]
  return %y
})",
                   {f32({1, 3, 1}, {1, 2, 3})});
  ASSERT_EQ(Out.size(), 1u);
  // Channel 0: 1 / (1 + (1 + 4 + 9)) ; 1: 2 / (1 + 14); 2: 3 / (1 + 13).
  expectNear(floatsOf(Out[0]), {1.0f / 15, 2.0f / 15, 3.0f / 14});
}

} // namespace
