//===- WindowSupport.h - Sliding windows of Conv and pooling ----*- C++ -*-===//
//
// The window of an ONNX Conv, MaxPool or AveragePool node over the spatial
// dimensions of X [N, C, D1, ..., Dn]: kernel, strides, dilations, the
// begin and end pads (explicit, or from auto_pad SAME_UPPER / SAME_LOWER /
// VALID) and the output size per spatial dimension, computed as the IR's
// shape function does (ShapeFunctionsConv.cpp): floor((in + pads -
// effective kernel) / stride) + 1, with ceil in ceil_mode, where a last
// window that would start in the end padding is dropped; ceil(in / stride)
// for SAME padding.
//
// Window I along a dimension starts at input index I * stride - pad_begin;
// its taps are start + J * dilation for J < kernel.
//
//===----------------------------------------------------------------------===//

#ifndef AUTOPAR_RUNTIME_CPU_WINDOWSUPPORT_H
#define AUTOPAR_RUNTIME_CPU_WINDOWSUPPORT_H

#include "runtime/cpu/KernelSupport.h"

namespace autopar {

struct SlidingWindow {
  /// Per spatial dimension.
  Shape In, Kernel, Strides, Dilations, PadBegin, PadEnd, Out;

  unsigned getNumSpatial() const { return In.size(); }
  int64_t getKernelSize() const;
  int64_t getOutSize() const;
};

/// Reads the window attributes of A's node for operand 0 (rank 3 or more)
/// and Kernel (one entry per spatial dimension), and computes the output
/// sizes; an error for malformed attributes or an empty output.
llvm::Expected<SlidingWindow> getSlidingWindow(const KernelArgs &A,
                                               llvm::ArrayRef<int64_t> Kernel,
                                               bool CeilMode);

/// The int list attribute Name with Count entries, each at least Min;
/// Default fills it when the attribute is absent.
llvm::Expected<Shape> getIntListAttr(const KernelArgs &A, llvm::StringRef Name,
                                     unsigned Count, int64_t Default,
                                     int64_t Min);

/// An error unless every given operand and result 0 is f32.
llvm::Error checkF32Operands(const KernelArgs &A);

} // namespace autopar

#endif // AUTOPAR_RUNTIME_CPU_WINDOWSUPPORT_H
