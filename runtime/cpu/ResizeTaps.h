//===- ResizeTaps.h - What each Resize output index reads -------*- C++ -*-===//
//
// The taps of ONNX Resize (opset 19) as onnxruntime computes them. Each
// axis maps output index x to a coordinate x' of the input (the
// coordinate_transformation_mode, in float arithmetic as onnxruntime), and
// reads a list of taps there: nearest one tap (nearest_mode; "simple" is
// onnxruntime's rule of Resize-10 and Upsample: truncation, or ceil along an
// axis that shrinks), the index clamped into the axis; linear two, x'
// clamped into [0, size - 1]; cubic four at floor(x') - 1 .. floor(x') + 2
// with Keys' weights (cubic_coeff_a), indices clamped to the edge, or with
// exclude_outside the weights of those outside dropped and the rest
// renormalized. Under tf_crop_and_resize an x' outside [0, size - 1] on any
// axis gives extrapolation_value (the kernel, ResizeKernels.cpp, fills it).
//
// With antialias, linear and cubic taps are onnxruntime's (Pillow's
// resampling): the filter (triangle, or Keys' cubic) is stretched by
// in / out along an axis that shrinks, centred on x' + 0.5, and covers the
// input indices [floor(c - support + 0.5), floor(c + support + 0.5)) for
// the half support 1 (linear) or 2 (cubic), times in / out when shrinking;
// taps outside the axis add to the edge (or are dropped with
// exclude_outside), and the weights are normalized to sum 1. An axis kept
// at its size is copied, as onnxruntime does.
//
//===----------------------------------------------------------------------===//

#ifndef AUTOPAR_RUNTIME_CPU_RESIZETAPS_H
#define AUTOPAR_RUNTIME_CPU_RESIZETAPS_H

#include "llvm/ADT/SmallVector.h"

#include <cstdint>

namespace autopar {
namespace resize {

enum class Interp { Nearest, Linear, Cubic };
enum class Coord {
  HalfPixel,
  HalfPixelSymmetric,
  PytorchHalfPixel,
  AlignCorners,
  Asymmetric,
  TfCropAndResize,
  TfHalfPixelForNN,
};
enum class Rounding { PreferFloor, PreferCeil, Floor, Ceil, Simple };

/// What Resize's attributes ask for.
struct ResizeMode {
  Interp Mode;
  Coord Transform;
  Rounding Nearest;
  double CubicA;
  bool ExcludeOutside;
  /// Linear or cubic with antialias (nearest ignores it).
  bool Antialias;
  float Extrapolation;
};

/// The input taps one output index along one axis reads.
struct AxisTaps {
  llvm::SmallVector<int64_t, 4> Index;
  llvm::SmallVector<double, 4> Weight;
  /// tf_crop_and_resize's coordinate fell outside the axis.
  bool Outside = false;
};

/// The taps of output index O along an axis of In elements resized to Out
/// by Scale; RoiStart and RoiEnd are tf_crop_and_resize's.
AxisTaps axisTaps(const ResizeMode &M, int64_t O, float Scale, int64_t In,
                  int64_t Out, float RoiStart, float RoiEnd);

} // namespace resize
} // namespace autopar

#endif // AUTOPAR_RUNTIME_CPU_RESIZETAPS_H
