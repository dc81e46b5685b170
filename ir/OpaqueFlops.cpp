//===- OpaqueFlops.cpp - Forward FLOPs of an Opaque node ------------------===//
//
// An Opaque node has no op of autopar's own, but its ONNX op type is known
// (`op_type`), and so are its types (ONNX's shape inference). Its FLOPs are
// estimated from them, counted as OpFlops.cpp counts (a multiply-add 2, each
// comparison, select or transcendental function 1), from the output shape
// where the inputs' values would be needed:
//   body_runs, body_flops  a Loop, Scan or If not unrolled: the FLOPs of one
//                          run of its body (the costlier branch), measured at
//                          import (frontend/LoopImporters.cpp), times the runs
//   DFT                    5 n log2 n per transform of length n, the count
//                          FFT benchmarks convert times with (FFTW's
//                          benchFFT, "mflops = 5 N log2(N) / time")
//   STFT                   per frame, that transform and the window's n
//                          products
//   Det                    2/3 n^3 per n x n matrix: its LU factorization
//                          (Golub and Van Loan, Matrix Computations, 3.2)
//   GridSample             per output element, 3 per interpolation tap
//                          (2^r linear, 4^r cubic, 0 nearest, r spatial
//                          axes: a multiply-add and the product of the
//                          axes' weights, as Resize in OpFlops.cpp) and 2
//                          per axis to unnormalize the grid
//   RoiAlign               per output element, sampling_ratio^2 samples
//                          (2 x 2 when adaptive) of 4 bilinear taps, 3 each,
//                          and the average or maximum
//   MaxRoiPool             per output element, a comparison per element of
//                          a bin of an ROI that covers the whole map (an
//                          upper bound)
//   Hann/HammingWindow     3 per element (a cosine, a product, a sum);
//                          BlackmanWindow 6 (two of each)
//   MelWeightMatrix        4 per element (the triangle filter's comparison,
//                          subtraction, division, select)
//   RandomUniform(Like)    2 per element (a draw, then scale and shift);
//                          RandomNormal(Like) 6 (Box-Muller: log, sqrt,
//                          cosine, products, then scale and shift);
//                          Bernoulli 2 (a draw and a comparison)
//   Multinomial            per row, 2 per class (exp and prefix sum) and a
//                          binary search (log2 classes) per sample
//   NonZero, Compress      1 per input element (a comparison or a select)
//   Unique                 n log2 n comparisons: a sort
//   NonMaxSuppression      per batch and class of n boxes, a sort (n log2 n)
//                          and at most n^2 / 2 IoUs of 13 FLOPs each (4
//                          min/max, 4 subtractions, 2 products, 2 sums, a
//                          division): an upper bound, as the boxes kept
//                          depend on the data
//   TfIdfVectorizer        max_gram_length lookups per input element
//   data movement          0: MaxUnpool
// (LpPool, GlobalLpPool, Resize, Upsample and ReverseSequence are imported
// as IR ops, priced by OpFlops.cpp.)
// Other op types, and those whose shapes are not static, have no estimate
// (nullopt): the node is priced by its bytes alone.
//
//===----------------------------------------------------------------------===//

#include "ir/Graph.h"
#include "ir/OpFlops.h"

#include "llvm/ADT/StringSwitch.h"

#include <cmath>

using namespace autopar;
using namespace llvm;

static std::optional<int64_t> intAttr(const Node &N, StringRef Name) {
  const Attribute *A = N.getAttr(Name);
  if (!A || !A->isa(Attribute::Kind::Int))
    return std::nullopt;
  return A->getInt();
}

static StringRef stringAttr(const Node &N, StringRef Name) {
  const Attribute *A = N.getAttr(Name);
  if (!A || !A->isa(Attribute::Kind::String))
    return "";
  return A->getString();
}

static std::optional<double> elements(const Value *V) {
  if (!V)
    return std::nullopt;
  if (std::optional<int64_t> E = V->getType().getStaticNumElements())
    return double(*E);
  return std::nullopt;
}

/// Static size of dimension I of V (negative I counts from the end).
static std::optional<double> dimSize(const Value *V, int64_t I) {
  std::optional<int64_t> Size =
      V ? V->getType().getStaticDimSize(I) : std::nullopt;
  if (!Size)
    return std::nullopt;
  return double(*Size);
}

/// 5 n log2 n: one FFT of length n.
static double fftFlops(double Length) {
  return Length > 1 ? 5 * Length * std::log2(Length) : 0;
}

/// Per output element of an interpolation over Axes axes with Mode.
static double interpolationFlops(StringRef Mode, unsigned Axes) {
  double Taps = Mode.contains("cubic")    ? std::pow(4.0, Axes)
                : Mode.contains("linear") ? std::pow(2.0, Axes)
                                          : 0;
  return 3 * Taps;
}

/// The estimate as a double; nullopt when a shape it needs is not static.
static std::optional<double> estimate(const Node &N) {
  const Value *In = N.getNumOperands() ? N.getOperand(0) : nullptr;
  const Value *Out = N.getNumResults() ? N.getResult(0) : nullptr;
  std::optional<double> OutElems = elements(Out), InElems = elements(In);
  auto PerOutput = [&](double F) -> std::optional<double> {
    if (!OutElems)
      return std::nullopt;
    return *OutElems * F;
  };
  auto PerInput = [&](double F) -> std::optional<double> {
    if (!InElems)
      return std::nullopt;
    return *InElems * F;
  };
  if (std::optional<int64_t> Runs = intAttr(N, "body_runs")) {
    std::optional<int64_t> Body = intAttr(N, "body_flops");
    if (!Body)
      return std::nullopt;
    return double(*Runs) * double(*Body);
  }
  if (!stringAttr(N, "domain").empty())
    return std::nullopt;
  StringRef Op = stringAttr(N, "op_type");

  if (Op == "DFT") {
    // [..., n, 1 or 2] -> [..., n or n/2 + 1, 2] along `axis` (opset 17's
    // attribute; opset 20's input defaults to -2).
    int64_t Axis = intAttr(N, "axis").value_or(-2);
    std::optional<double> Len = dimSize(Out, Axis);
    if (!Len || !OutElems || *Len == 0)
      return std::nullopt;
    double Transforms = *OutElems / (*Len * 2);
    double Length = intAttr(N, "onesided").value_or(0) ? 2 * (*Len - 1) : *Len;
    return Transforms * fftFlops(Length);
  }
  if (Op == "STFT") {
    // [batch, frames, bins, 2].
    std::optional<double> Batch = dimSize(Out, 0), Frames = dimSize(Out, 1),
                          Bins = dimSize(Out, 2);
    if (!Batch || !Frames || !Bins)
      return std::nullopt;
    double Length =
        intAttr(N, "onesided").value_or(1) ? 2 * (*Bins - 1) : *Bins;
    return *Batch * *Frames * (fftFlops(Length) + Length);
  }
  if (Op == "Det") {
    std::optional<double> Size = dimSize(In, -1);
    if (!Size || !InElems || *Size == 0)
      return std::nullopt;
    double Matrices = *InElems / (*Size * *Size);
    return Matrices * 2.0 / 3.0 * *Size * *Size * *Size;
  }
  if (Op == "GridSample") {
    if (!Out || Out->getType().getRank() < 3)
      return std::nullopt;
    unsigned Axes = Out->getType().getRank() - 2;
    StringRef Mode = stringAttr(N, "mode");
    return PerOutput(interpolationFlops(Mode.empty() ? "linear" : Mode, Axes) +
                     2 * Axes);
  }
  if (Op == "RoiAlign") {
    int64_t Ratio = intAttr(N, "sampling_ratio").value_or(0);
    double Samples = Ratio > 0 ? double(Ratio * Ratio) : 4;
    return PerOutput(Samples * (interpolationFlops("linear", 2) + 1));
  }
  if (Op == "MaxRoiPool") {
    std::optional<double> H = dimSize(In, 2), W = dimSize(In, 3),
                          PH = dimSize(Out, 2), PW = dimSize(Out, 3);
    if (!H || !W || !PH || !PW || *PH == 0 || *PW == 0)
      return std::nullopt;
    return PerOutput(std::ceil(*H / *PH) * std::ceil(*W / *PW));
  }
  if (Op == "Multinomial") {
    std::optional<double> Rows = dimSize(In, 0), Classes = dimSize(In, 1),
                          Samples = dimSize(Out, 1);
    if (!Rows || !Classes || !Samples)
      return std::nullopt;
    return *Rows * (2 * *Classes +
                    *Samples * std::ceil(std::log2(std::max(*Classes, 2.0))));
  }
  if (Op == "Unique") {
    if (!InElems)
      return std::nullopt;
    return *InElems * std::log2(std::max(*InElems, 2.0));
  }
  if (Op == "NonMaxSuppression") {
    // boxes [batch, n, 4], scores [batch, classes, n].
    const Value *Scores = N.getNumOperands() > 1 ? N.getOperand(1) : nullptr;
    std::optional<double> Batch = dimSize(Scores, 0),
                          Classes = dimSize(Scores, 1),
                          Boxes = dimSize(Scores, 2);
    if (!Batch || !Classes || !Boxes)
      return std::nullopt;
    double Sort = *Boxes * std::log2(std::max(*Boxes, 2.0));
    return *Batch * *Classes * (Sort + 13 * *Boxes * *Boxes / 2);
  }
  if (Op == "TfIdfVectorizer")
    return PerInput(double(intAttr(N, "max_gram_length").value_or(1)));
  std::optional<double> PerElement =
      StringSwitch<std::optional<double>>(Op)
          .Cases("HannWindow", "HammingWindow", 3.0)
          .Case("BlackmanWindow", 6.0)
          .Case("MelWeightMatrix", 4.0)
          .Cases("RandomUniform", "RandomUniformLike", "Bernoulli", 2.0)
          .Cases("RandomNormal", "RandomNormalLike", 6.0)
          .Case("MaxUnpool", 0.0)
          .Default(std::nullopt);
  if (PerElement)
    return PerOutput(*PerElement);
  if (Op == "NonZero" || Op == "Compress")
    return PerInput(1);
  return std::nullopt;
}

std::optional<int64_t> autopar::getOpaqueFlops(const Node &N) {
  std::optional<double> F = estimate(N);
  // Past int64 (9.2e18) the count is as good as unknown.
  if (!F || !std::isfinite(*F) || *F < 0 || *F >= 9.2e18)
    return std::nullopt;
  return int64_t(std::llround(*F));
}
