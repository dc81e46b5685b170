//===- RuntimeQuantizedKernelsTest.cpp - What onnxruntime cannot check ----===//
//
// The quantized kernels are compared with onnxruntime's in
// test/Runtime/ort-quantized.test; what its CPU kernels do not take is
// checked here against values worked by hand: ConvInteger with a zero
// point per output channel of the weights.
//
//===----------------------------------------------------------------------===//

#include "RuntimeTestSupport.h"

using namespace autopar;
using namespace autopar::test;

namespace {

TEST(RuntimeQuantizedKernels, ConvIntegerZeroPointPerOutputChannel) {
  // A 1x1 convolution of x = [3, 5] (x_zero_point 1: 2, 4) with weights
  // 2 and 3 whose zero points are 1 and -1: output channel 0 multiplies by
  // 2 - 1 = 1, channel 1 by 3 + 1 = 4.
  std::vector<HostTensor> Out = runProgram(R"(
graph @g(%x: f32[1, 1, 1, 2]) {
  %codes = Cast(%x) {to = "u8"} : u8[1, 1, 1, 2]
  %w = Constant() {value = dense<i8[2, 1, 1, 1], [2, 3]>} : i8[2, 1, 1, 1]
  %xz = Constant() {value = dense<u8[], [1]>} : u8[]
  %wz = Constant() {value = dense<i8[2], [1, -1]>} : i8[2]
  %y = ConvInteger(%codes, %w, %xz, %wz) : i32[1, 2, 1, 2]
  %f = Cast(%y) {to = "f32"} : f32[1, 2, 1, 2]
  return %f
}
)",
                                           {f32({1, 1, 1, 2}, {3, 5})});
  ASSERT_EQ(Out.size(), 1u);
  expectNear(floatsOf(Out[0]), {2, 4, 8, 16});
}

} // namespace
