//===- RuntimeIndexKernelsTest.cpp - Pad, indexing and loss kernels -------===//
//
// The CPU kernels of Pad, GatherElements, ScatterElements, GatherND,
// ScatterND, SpaceToDepth, DepthToSpace, OneHot, EyeLike and
// NegativeLogLikelihoodLoss, each run in a small program and compared with
// the examples of the ONNX operator specs or values numpy gives
// (numpy.pad's modes, the reshape-transpose-reshape of the depth ops).
//
//===----------------------------------------------------------------------===//

#include "RuntimeTestSupport.h"

using namespace autopar;
using namespace autopar::test;

namespace {

std::vector<float> floats(const std::vector<HostTensor> &Out, size_t I) {
  return I < Out.size() ? floatsOf(Out[I]) : std::vector<float>();
}

std::vector<int64_t> ints(const std::vector<HostTensor> &Out, size_t I) {
  return I < Out.size() ? elementsOf<int64_t>(Out[I]) : std::vector<int64_t>();
}

TEST(RuntimeIndexKernels, PadModesFollowNumpy) {
  std::vector<HostTensor> Out =
      runProgram(R"(
graph @g(%x: f32[2, 3], %n: i64[3]) {
  %pads = Constant() {value = dense<i64[4], [0, 2, 0, 1]>} : i64[4]
  %half = Constant() {value = dense<f32[], [0.5]>} : f32[]
  %crop = Constant() {value = dense<i64[4], [1, -1, 0, 0]>} : i64[4]
  %five = Constant() {value = dense<i64[2], [5, 5]>} : i64[2]
  %axes = Constant() {value = dense<i64[1], [-1]>} : i64[1]
  %one = Constant() {value = dense<i64[2], [1, 1]>} : i64[2]
  %constant = Pad(%x, %pads, %half) : f32[2, 6]
  %reflect = Pad(%x, %pads) {mode = "reflect"} : f32[2, 6]
  %edge = Pad(%x, %pads) {mode = "edge"} : f32[2, 6]
  %wrap = Pad(%x, %pads) {mode = "wrap"} : f32[2, 6]
  %cropped = Pad(%x, %crop) : f32[3, 2]
  %long = Pad(%n, %five) {mode = "reflect"} : i64[13]
  %last = Pad(%x, %one, _, %axes) : f32[2, 5]
  return %constant, %reflect, %edge, %wrap, %cropped, %long, %last
}
)",
                 {f32({2, 3}, {1, 2, 3, 4, 5, 6}), i64({3}, {1, 2, 3})});
  expectNear(floats(Out, 0), {.5, .5, 1, 2, 3, .5, .5, .5, 4, 5, 6, .5});
  expectNear(floats(Out, 1), {3, 2, 1, 2, 3, 2, 6, 5, 4, 5, 6, 5});
  expectNear(floats(Out, 2), {1, 1, 1, 2, 3, 3, 4, 4, 4, 5, 6, 6});
  expectNear(floats(Out, 3), {2, 3, 1, 2, 3, 1, 5, 6, 4, 5, 6, 4});
  expectNear(floats(Out, 4), {0, 0, 2, 3, 5, 6});
  // numpy.pad([1, 2, 3], 5, "reflect"): periodic past the edges.
  EXPECT_EQ(ints(Out, 5),
            (std::vector<int64_t>{2, 1, 2, 3, 2, 1, 2, 3, 2, 1, 2, 3, 2}));
  expectNear(floats(Out, 6), {0, 1, 2, 3, 0, 0, 4, 5, 6, 0});
}

TEST(RuntimeIndexKernels, ElementsGatherAndScatterAlongAnAxis) {
  // The examples of ONNX's GatherElements and ScatterElements.
  std::vector<HostTensor> Out = runProgram(
      R"(
graph @g(%d: f32[2, 2], %i: i64[2, 2], %z: f32[3, 3], %j: i64[2, 3],
         %u: f32[2, 3]) {
  %g = GatherElements(%d, %i) {axis = 1} : f32[2, 2]
  %s = ScatterElements(%z, %j, %u) : f32[3, 3]
  %a = ScatterElements(%z, %j, %u) {axis = 1, reduction = "add"} : f32[3, 3]
  return %g, %s, %a
}
)",
      {f32({2, 2}, {1, 2, 3, 4}), i64({2, 2}, {0, 0, 1, 0}),
       f32({3, 3}, std::vector<float>(9)), i64({2, 3}, {1, 0, 2, 0, 2, -2}),
       f32({2, 3}, {1, 1.1f, 1.2f, 2, 2.1f, 2.2f})});
  expectNear(floats(Out, 0), {1, 1, 4, 3});
  expectNear(floats(Out, 1), {2, 1.1f, 0, 1, 0, 2.2f, 0, 2.1f, 1.2f});
  // Along axis 1 row 0 gets 1.1 at 0, 1 at 1, 1.2 at 2; row 1 gets 2 at
  // 0, 2.2 at 1 (-2), 2.1 at 2.
  expectNear(floats(Out, 2), {1.1f, 1, 1.2f, 2, 2.2f, 2.1f, 0, 0, 0});
}

TEST(RuntimeIndexKernels, GatherNDAndScatterNDFollowTheSpecExamples) {
  std::vector<HostTensor> Out = runProgram(
      R"(
graph @g(%d: i64[2, 2], %b: i64[2, 2, 2], %x: f32[8], %y: i64[4]) {
  %pairs = Constant() {value = dense<i64[2, 2], [0, 0, 1, 1]>} : i64[2, 2]
  %rows = Constant() {value = dense<i64[2, 1], [1, 0]>} : i64[2, 1]
  %neg = Constant() {value = dense<i64[1, 2], [-1, -2]>} : i64[1, 2]
  %at = Constant() {value = dense<i64[4, 1], [4, 3, 1, 7]>} : i64[4, 1]
  %dup = Constant() {value = dense<i64[3, 1], [1, 1, 3]>} : i64[3, 1]
  %upd = Constant() {value = dense<f32[4], [9.0, 10.0, 11.0, 12.0]>} : f32[4]
  %iupd = Constant() {value = dense<i64[3], [10, 20, 30]>} : i64[3]
  %g1 = GatherND(%d, %pairs) : i64[2]
  %g2 = GatherND(%d, %rows) : i64[2, 2]
  %g3 = GatherND(%b, %rows) {batch_dims = 1} : i64[2, 2]
  %g4 = GatherND(%d, %neg) : i64[1]
  %s = ScatterND(%x, %at, %upd) : f32[8]
  %add = ScatterND(%y, %dup, %iupd) {reduction = "add"} : i64[4]
  %mul = ScatterND(%y, %dup, %iupd) {reduction = "mul"} : i64[4]
  %max = ScatterND(%y, %dup, %iupd) {reduction = "max"} : i64[4]
  %min = ScatterND(%y, %dup, %iupd) {reduction = "min"} : i64[4]
  return %g1, %g2, %g3, %g4, %s, %add, %mul, %max, %min
}
)",
      {i64({2, 2}, {0, 1, 2, 3}), i64({2, 2, 2}, {0, 1, 2, 3, 4, 5, 6, 7}),
       f32({8}, {1, 2, 3, 4, 5, 6, 7, 8}), i64({4}, {1, 2, 3, 40})});
  EXPECT_EQ(ints(Out, 0), (std::vector<int64_t>{0, 3}));
  EXPECT_EQ(ints(Out, 1), (std::vector<int64_t>{2, 3, 0, 1}));
  EXPECT_EQ(ints(Out, 2), (std::vector<int64_t>{2, 3, 4, 5}));
  EXPECT_EQ(ints(Out, 3), (std::vector<int64_t>{2}));
  expectNear(floats(Out, 4), {1, 11, 3, 10, 9, 6, 7, 12});
  EXPECT_EQ(ints(Out, 5), (std::vector<int64_t>{1, 32, 3, 70}));
  EXPECT_EQ(ints(Out, 6), (std::vector<int64_t>{1, 400, 3, 1200}));
  EXPECT_EQ(ints(Out, 7), (std::vector<int64_t>{1, 20, 3, 40}));
  EXPECT_EQ(ints(Out, 8), (std::vector<int64_t>{1, 2, 3, 30}));
}

TEST(RuntimeIndexKernels, IntegerReductionsWrapAround) {
  std::vector<HostTensor> Out =
      runProgram(R"(
graph @g(%x: i64[2], %u: i64[1]) {
  %at = Constant() {value = dense<i64[1, 1], [0]>} : i64[1, 1]
  %add = ScatterND(%x, %at, %u) {reduction = "add"} : i64[2]
  %mul = ScatterND(%x, %at, %u) {reduction = "mul"} : i64[2]
  return %add, %mul
}
)",
                 {i64({2}, {INT64_MAX, 5}), i64({1}, {2})});
  EXPECT_EQ(ints(Out, 0), (std::vector<int64_t>{INT64_MIN + 1, 5}));
  EXPECT_EQ(ints(Out, 1), (std::vector<int64_t>{-2, 5}));
}

TEST(RuntimeIndexKernels, IndexOutOfRangeIsAnError) {
  std::string Error;
  runProgram(R"(
graph @g(%d: f32[2, 2], %i: i64[1, 2]) {
  %g = GatherND(%d, %i) : f32[1]
  return %g
}
)",
             {f32({2, 2}, {0, 1, 2, 3}), i64({1, 2}, {0, 2})}, &Error);
  EXPECT_EQ(Error, "node '%g' (GatherND): index 2 is out of range for axis 1 "
                   "of size 2");
}

TEST(RuntimeIndexKernels, DepthAndSpaceFollowTheReshapeTranspose) {
  std::vector<float> Iota(16);
  for (int I = 0; I != 16; ++I)
    Iota[I] = float(I);
  std::vector<HostTensor> Out =
      runProgram(R"(
graph @g(%x: f32[1, 8, 1, 2], %y: f32[1, 1, 4, 4]) {
  %dcr = DepthToSpace(%x) {blocksize = 2} : f32[1, 2, 2, 4]
  %crd = DepthToSpace(%x) {blocksize = 2, mode = "CRD"} : f32[1, 2, 2, 4]
  %s2d = SpaceToDepth(%y) {blocksize = 2} : f32[1, 4, 2, 2]
  %back = DepthToSpace(%s2d) {blocksize = 2} : f32[1, 1, 4, 4]
  return %dcr, %crd, %s2d, %back
}
)",
                 {f32({1, 8, 1, 2}, Iota), f32({1, 1, 4, 4}, Iota)});
  // numpy: x.reshape(1, 2, 2, 2, 1, 2).transpose(0, 3, 4, 1, 5, 2) (DCR),
  // x.reshape(1, 2, 2, 2, 1, 2).transpose(0, 1, 4, 2, 5, 3) (CRD).
  expectNear(floats(Out, 0),
             {0, 4, 1, 5, 8, 12, 9, 13, 2, 6, 3, 7, 10, 14, 11, 15});
  expectNear(floats(Out, 1),
             {0, 2, 1, 3, 4, 6, 5, 7, 8, 10, 9, 11, 12, 14, 13, 15});
  expectNear(floats(Out, 2),
             {0, 2, 8, 10, 1, 3, 9, 11, 4, 6, 12, 14, 5, 7, 13, 15});
  expectNear(floats(Out, 3), Iota);
}

TEST(RuntimeIndexKernels, OneHotAndEyeLike) {
  std::vector<HostTensor> Out = runProgram(
      R"(
graph @g(%i: i64[4], %m: f32[3, 4]) {
  %depth = Constant() {value = dense<i64[], [3]>} : i64[]
  %values = Constant() {value = dense<f32[2], [-1.0, 2.0]>} : f32[2]
  %last = OneHot(%i, %depth, %values) : f32[4, 3]
  %first = OneHot(%i, %depth, %values) {axis = 0} : f32[3, 4]
  %eye = EyeLike(%m) {k = 1} : f32[3, 4]
  %below = EyeLike(%m) {dtype = "i64", k = -1} : i64[3, 4]
  return %last, %first, %eye, %below
}
)",
      {i64({4}, {0, 2, -1, 5}), f32({3, 4}, std::vector<float>(12))});
  // -1 counts from the end (2); 5 is out of range: all off.
  expectNear(floats(Out, 0), {2, -1, -1, -1, -1, 2, -1, -1, 2, -1, -1, -1});
  expectNear(floats(Out, 1), {2, -1, -1, -1, -1, -1, -1, -1, -1, 2, 2, -1});
  expectNear(floats(Out, 2), {0, 1, 0, 0, 0, 0, 1, 0, 0, 0, 0, 1});
  EXPECT_EQ(ints(Out, 3),
            (std::vector<int64_t>{0, 0, 0, 0, 1, 0, 0, 0, 0, 1, 0, 0}));
}

TEST(RuntimeIndexKernels, NegativeLogLikelihoodLossReductions) {
  // input [N = 2, C = 3, d = 2]; targets per (n, d).
  std::vector<float> X = {-0.1f, -0.2f, -1.0f, -2.0f, -3.0f, -0.5f,
                          -0.7f, -0.4f, -1.5f, -2.5f, -0.9f, -0.6f};
  std::vector<HostTensor> Out =
      runProgram(R"(
graph @g(%x: f32[2, 3, 2], %t: i64[2, 2], %w: f32[3]) {
  %none = NegativeLogLikelihoodLoss(%x, %t) {reduction = "none"} : f32[2, 2]
  %sum = NegativeLogLikelihoodLoss(%x, %t) {reduction = "sum"} : f32[]
  %mean = NegativeLogLikelihoodLoss(%x, %t, %w) : f32[]
  %ignored = NegativeLogLikelihoodLoss(%x, %t, %w) {ignore_index = 2} : f32[]
  return %none, %sum, %mean, %ignored
}
)",
                 {f32({2, 3, 2}, X), i64({2, 2}, {0, 2, 1, 2}),
                  f32({3}, {0.2f, 0.3f, 0.5f})});
  // Element (n, d) with target t reads x[n, t, d].
  expectNear(floats(Out, 0), {0.1f, 0.5f, 1.5f, 0.6f});
  expectNear(floats(Out, 1), {2.7f});
  double Weighted = 0.1 * 0.2 + 0.5 * 0.5 + 1.5 * 0.3 + 0.6 * 0.5;
  expectNear(floats(Out, 2), {float(Weighted / 1.5)});
  expectNear(floats(Out, 3), {float((0.1 * 0.2 + 1.5 * 0.3) / 0.5)});
}

} // namespace
