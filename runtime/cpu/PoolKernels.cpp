//===- PoolKernels.cpp - MaxPool, AveragePool, LpPool and global pools ----===//
//
// ONNX pooling over X [N, C, D1, ..., Dn] in f32, windows as in
// WindowSupport.h (strides, dilations, pads, auto_pad, ceil_mode). A window
// takes the taps inside X; in ceil_mode the last window may reach past the
// end padding, as in PyTorch and onnxruntime.
//
// MaxPool: the largest tap (the first one in row-major tap order on ties),
// lowest float for a window entirely in the padding; the optional Indices
// (i64) are the flattened offsets of those taps in X, with the spatial
// offset row-major (storage_order 0) or column-major (storage_order 1).
// AveragePool: the f64 sum of the taps divided by their number, or with
// count_include_pad by the number of window positions inside the padded
// input [-pad_begin, in + pad_end) (so a ceil_mode window counts no
// positions past the end padding); NaN when, without count_include_pad, a
// window has no taps inside X.
// GlobalAveragePool: the f64 mean of each [D1, ..., Dn] plane.
// LpPool: (the f64 sum of |tap|^p over the taps inside X)^(1/p), the
// padding adding nothing (0 for a window entirely in it), as onnxruntime;
// GlobalLpPool the same over each whole plane.
//
// Planes (n, c) are split over the kernel threads; each output is reduced in
// tap order, so results do not depend on the thread count.
//
//===----------------------------------------------------------------------===//

#include "runtime/cpu/Kernels.h"
#include "runtime/cpu/WindowSupport.h"

#include "ir/Graph.h"

#include "llvm/ADT/STLExtras.h"

#include <cmath>
#include <limits>
#include <vector>

using namespace autopar;
using namespace llvm;

namespace {

/// Per spatial dimension and output index: the input indices of the
/// window's taps that lie inside X, and how many of its taps lie inside the
/// padded input.
struct WindowTaps {
  std::vector<std::vector<std::vector<int64_t>>> Inside;
  std::vector<std::vector<int64_t>> Padded;

  explicit WindowTaps(const SlidingWindow &W) {
    for (unsigned D = 0; D != W.getNumSpatial(); ++D) {
      Inside.emplace_back(W.Out[D]);
      Padded.emplace_back(W.Out[D], 0);
      for (int64_t O = 0; O != W.Out[D]; ++O) {
        int64_t Start = O * W.Strides[D] - W.PadBegin[D];
        for (int64_t J = 0; J != W.Kernel[D]; ++J) {
          int64_t I = Start + J * W.Dilations[D];
          if (I >= 0 && I < W.In[D])
            Inside[D][O].push_back(I);
          if (I < W.In[D] + W.PadEnd[D])
            ++Padded[D][O];
        }
      }
    }
  }
};

} // namespace

/// Calls Body(Plane, Out, Lists, Index) for every plane of X and output
/// position: Out is the position's row-major offset in the plane, Index
/// its per-dimension output indices and Lists the per-dimension input
/// indices of its window's taps inside X. Planes are split over the kernel
/// threads.
template <typename Fn>
static void forEachWindow(const SlidingWindow &W, const WindowTaps &Taps,
                          int64_t Planes, Fn Body) {
  unsigned NumSpatial = W.getNumSpatial();
  int64_t OutSize = W.getOutSize();
  parallelFor(Planes, [&](int64_t Plane) {
    Shape Index(NumSpatial, 0);
    SmallVector<ArrayRef<int64_t>, 4> Lists(NumSpatial);
    for (int64_t O = 0; O != OutSize; ++O) {
      for (unsigned D = 0; D != NumSpatial; ++D)
        Lists[D] = Taps.Inside[D][Index[D]];
      Body(Plane, O, ArrayRef<ArrayRef<int64_t>>(Lists),
           ArrayRef<int64_t>(Index));
      for (unsigned D = NumSpatial; D-- > 0;) {
        if (++Index[D] != W.Out[D])
          break;
        Index[D] = 0;
      }
    }
  });
}

/// Calls Visit(Offset, Tap) for every combination of the per-dimension
/// input indices in Lists (row-major), Offset being Sum Tap[D] *
/// Strides[D].
template <typename Fn>
static void forEachTap(ArrayRef<ArrayRef<int64_t>> Lists,
                       ArrayRef<int64_t> Strides, Fn Visit) {
  unsigned Rank = Lists.size();
  for (ArrayRef<int64_t> L : Lists)
    if (L.empty())
      return;
  SmallVector<size_t, 4> Pos(Rank, 0);
  while (true) {
    int64_t Offset = 0;
    for (unsigned D = 0; D != Rank; ++D)
      Offset += Lists[D][Pos[D]] * Strides[D];
    Visit(Offset, ArrayRef<size_t>(Pos));
    unsigned D = Rank;
    while (D-- > 0) {
      if (++Pos[D] != Lists[D].size())
        break;
      Pos[D] = 0;
    }
    if (D == unsigned(-1))
      return;
  }
}

/// Checks X and returns the window of a MaxPool or AveragePool node and its
/// checked result shape.
static Expected<SlidingWindow> getPoolWindow(const KernelArgs &A) {
  if (Error E = A.checkType(0, {ElementType::F32}))
    return E;
  if (Error E = A.checkResultType(0, {ElementType::F32}))
    return E;
  const Tensor &X = A.In[0];
  if (X.getRank() < 3)
    return A.error("operand 0 " + X.getTypeString() +
                   " must have a batch, a channel and a spatial dimension");
  int64_t CeilMode = A.intAttr("ceil_mode", 0);
  if (CeilMode != 0 && CeilMode != 1)
    return A.error("'ceil_mode' must be 0 or 1, got " + Twine(CeilMode));
  Expected<Shape> Kernel =
      getIntListAttr(A, "kernel_shape", X.getRank() - 2, 0, 1);
  if (!Kernel)
    return Kernel.takeError();
  if (!A.attr("kernel_shape"))
    return A.error("'kernel_shape' is required");
  Expected<SlidingWindow> W = getSlidingWindow(A, *Kernel, CeilMode);
  if (!W)
    return W.takeError();
  Shape YShape = toShape(X.getShape().take_front(2));
  YShape.append(W->Out.begin(), W->Out.end());
  if (Error E = A.checkShape(0, YShape))
    return E;
  return W;
}

Error autopar::runMaxPool(const KernelArgs &A) {
  Expected<SlidingWindow> W = getPoolWindow(A);
  if (!W)
    return W.takeError();
  int64_t StorageOrder = A.intAttr("storage_order", 0);
  if (StorageOrder != 0 && StorageOrder != 1)
    return A.error("'storage_order' must be 0 or 1, got " +
                   Twine(StorageOrder));
  bool WithIndices = A.hasResult(1);
  if (WithIndices) {
    if (Error E = A.checkShape(1, A.Out[0].getShape()))
      return E;
    if (Error E = A.checkResultType(1, {ElementType::I64}))
      return E;
  }
  const Tensor &X = A.In[0];
  int64_t InSize = getNumElements(W->In), OutSize = W->getOutSize();
  int64_t Planes = X.getShape()[0] * X.getShape()[1];
  Shape RowMajor = getStrides(W->In), IndexStrides = RowMajor;
  if (StorageOrder == 1) {
    int64_t Stride = 1;
    for (unsigned D = 0; D != W->getNumSpatial(); ++D) {
      IndexStrides[D] = Stride;
      Stride *= W->In[D];
    }
  }
  const float *XD = X.data<float>();
  float *YD = A.Out[0].data<float>();
  int64_t *ID = WithIndices ? A.Out[1].data<int64_t>() : nullptr;
  WindowTaps Taps(*W);
  forEachWindow(*W, Taps, Planes,
                [&](int64_t Plane, int64_t O, ArrayRef<ArrayRef<int64_t>> Lists,
                    ArrayRef<int64_t>) {
                  const float *In = XD + Plane * InSize;
                  float Max = std::numeric_limits<float>::lowest();
                  SmallVector<size_t, 4> Best;
                  forEachTap(Lists, RowMajor,
                             [&](int64_t Offset, ArrayRef<size_t> Pos) {
                               if (Best.empty() || In[Offset] > Max) {
                                 Max = In[Offset];
                                 Best.assign(Pos.begin(), Pos.end());
                               }
                             });
                  YD[Plane * OutSize + O] = Max;
                  if (!ID)
                    return;
                  int64_t Index = 0;
                  for (unsigned D = 0; D != Best.size(); ++D)
                    Index += Lists[D][Best[D]] * IndexStrides[D];
                  ID[Plane * OutSize + O] = Plane * InSize + Index;
                });
  return Error::success();
}

Error autopar::runAveragePool(const KernelArgs &A) {
  Expected<SlidingWindow> W = getPoolWindow(A);
  if (!W)
    return W.takeError();
  int64_t IncludePad = A.intAttr("count_include_pad", 0);
  if (IncludePad != 0 && IncludePad != 1)
    return A.error("'count_include_pad' must be 0 or 1, got " +
                   Twine(IncludePad));
  const Tensor &X = A.In[0];
  int64_t InSize = getNumElements(W->In), OutSize = W->getOutSize();
  int64_t Planes = X.getShape()[0] * X.getShape()[1];
  Shape RowMajor = getStrides(W->In);
  const float *XD = X.data<float>();
  float *YD = A.Out[0].data<float>();
  WindowTaps Taps(*W);
  forEachWindow(*W, Taps, Planes,
                [&](int64_t Plane, int64_t O, ArrayRef<ArrayRef<int64_t>> Lists,
                    ArrayRef<int64_t> Index) {
                  const float *In = XD + Plane * InSize;
                  double Sum = 0;
                  int64_t Count = 0;
                  forEachTap(Lists, RowMajor,
                             [&](int64_t Offset, ArrayRef<size_t>) {
                               Sum += In[Offset];
                               ++Count;
                             });
                  if (IncludePad) {
                    Count = 1;
                    for (unsigned D = 0; D != Index.size(); ++D)
                      Count *= Taps.Padded[D][Index[D]];
                  }
                  YD[Plane * OutSize + O] =
                      Count ? float(Sum / double(Count))
                            : std::numeric_limits<float>::quiet_NaN();
                });
  return Error::success();
}

/// A global pool: each [batch, channel] plane of X (f32, rank >= 3) reduced
/// to one value by Reduce(plane, its size), the result [batch, channel, 1,
/// ...].
static Error runGlobalPool(const KernelArgs &A,
                           function_ref<float(const float *, int64_t)> Reduce) {
  if (Error E = checkF32Operands(A))
    return E;
  const Tensor &X = A.In[0];
  if (X.getRank() < 3)
    return A.error("operand 0 " + X.getTypeString() +
                   " must have a batch, a channel and a spatial dimension");
  Shape YShape = toShape(X.getShape().take_front(2));
  YShape.resize(X.getRank(), 1);
  if (Error E = A.checkShape(0, YShape))
    return E;
  int64_t InSize = getNumElements(X.getShape().drop_front(2));
  const float *XD = X.data<float>();
  float *YD = A.Out[0].data<float>();
  parallelFor(X.getShape()[0] * X.getShape()[1], [&](int64_t Plane) {
    YD[Plane] = Reduce(XD + Plane * InSize, InSize);
  });
  return Error::success();
}

Error autopar::runGlobalAveragePool(const KernelArgs &A) {
  return runGlobalPool(A, [](const float *In, int64_t Size) {
    double Sum = 0;
    for (int64_t J = 0; J != Size; ++J)
      Sum += In[J];
    return Size ? float(Sum / double(Size))
                : std::numeric_limits<float>::quiet_NaN();
  });
}

/// LpPool's and GlobalLpPool's p, a positive integer (2 when absent).
static Expected<int64_t> getLpPoolP(const KernelArgs &A) {
  int64_t P = A.intAttr("p", 2);
  if (P < 1)
    return A.error("'p' must be positive, got " + Twine(P));
  return P;
}

/// |V|^P, by multiplication for the usual P.
static double absPow(double V, int64_t P) {
  double Abs = std::fabs(V);
  switch (P) {
  case 1:
    return Abs;
  case 2:
    return Abs * Abs;
  default:
    return std::pow(Abs, double(P));
  }
}

/// Sum^(1/P), the inverse of absPow.
static float lpRoot(double Sum, int64_t P) {
  switch (P) {
  case 1:
    return float(Sum);
  case 2:
    return float(std::sqrt(Sum));
  default:
    return float(std::pow(Sum, 1.0 / double(P)));
  }
}

Error autopar::runLpPool(const KernelArgs &A) {
  Expected<SlidingWindow> W = getPoolWindow(A);
  if (!W)
    return W.takeError();
  Expected<int64_t> P = getLpPoolP(A);
  if (!P)
    return P.takeError();
  const Tensor &X = A.In[0];
  int64_t InSize = getNumElements(W->In), OutSize = W->getOutSize();
  int64_t Planes = X.getShape()[0] * X.getShape()[1];
  Shape RowMajor = getStrides(W->In);
  const float *XD = X.data<float>();
  float *YD = A.Out[0].data<float>();
  WindowTaps Taps(*W);
  forEachWindow(*W, Taps, Planes,
                [&](int64_t Plane, int64_t O, ArrayRef<ArrayRef<int64_t>> Lists,
                    ArrayRef<int64_t>) {
                  const float *In = XD + Plane * InSize;
                  double Sum = 0;
                  forEachTap(Lists, RowMajor,
                             [&](int64_t Offset, ArrayRef<size_t>) {
                               Sum += absPow(In[Offset], *P);
                             });
                  YD[Plane * OutSize + O] = lpRoot(Sum, *P);
                });
  return Error::success();
}

Error autopar::runGlobalLpPool(const KernelArgs &A) {
  Expected<int64_t> P = getLpPoolP(A);
  if (!P)
    return P.takeError();
  return runGlobalPool(A, [&](const float *In, int64_t Size) {
    double Sum = 0;
    for (int64_t J = 0; J != Size; ++J)
      Sum += absPow(In[J], *P);
    return lpRoot(Sum, *P);
  });
}
