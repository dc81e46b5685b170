//===- ConvKernels.cpp - ONNX Conv through im2col and CBLAS ---------------===//
//
// Conv over X [N, C, D1, ..., Dn] (n >= 1) with W [M, C / group, k1, ...,
// kn] and the optional bias B [M], in f32, with groups, strides, dilations,
// explicit pads and auto_pad (WindowSupport.h). For each image and group,
// the padded input windows are unfolded into a [C / group * k1 * ... * kn,
// output positions] matrix (im2col; a 1x1 kernel with unit strides and no
// pads uses X as it is), and one GEMM with the group's weights gives the
// group's [M / group, output positions] block of Y; the bias is added after.
// The unfolding is split over its rows on the kernel threads (disjoint
// writes, so it does not depend on their number); the GEMMs are OpenBLAS's,
// as MatMul's are (MatMulKernels.cpp).
//
//===----------------------------------------------------------------------===//

#include "runtime/cpu/Kernels.h"
#include "runtime/cpu/WindowSupport.h"

#include "ir/Graph.h"

#include <cblas.h>

#include <algorithm>
#include <climits>
#include <cstring>
#include <vector>

using namespace autopar;
using namespace llvm;

/// Unfolds the Channels planes of X (each of W.In) into Col [Channels *
/// kernel size, output positions]: row (C, K) holds, for every output
/// position, the input element under kernel tap K of channel C, or 0 in the
/// padding.
template <typename T>
static void im2col(const T *X, const SlidingWindow &W, int64_t Channels,
                   T *Col) {
  unsigned NumSpatial = W.getNumSpatial(), Last = NumSpatial - 1;
  int64_t KernelSize = W.getKernelSize(), OutSize = W.getOutSize();
  int64_t InSize = getNumElements(W.In);
  int64_t OutLast = W.Out[Last];
  if (OutSize == 0)
    return;
  int64_t Outer = OutSize / OutLast;
  Shape InStrides = getStrides(W.In);
  parallelFor(Channels * KernelSize, [&](int64_t Row) {
    Shape Tap(NumSpatial);
    int64_t K = Row % KernelSize;
    for (unsigned D = NumSpatial; D-- > 0;) {
      Tap[D] = K % W.Kernel[D];
      K /= W.Kernel[D];
    }
    const T *XC = X + Row / KernelSize * InSize;
    T *Dst = Col + Row * OutSize;
    // Along the last dimension, output O reads input O * Stride + Offset:
    // outputs [Lo, Hi) are inside the input.
    int64_t Stride = W.Strides[Last];
    int64_t Offset = Tap[Last] * W.Dilations[Last] - W.PadBegin[Last];
    int64_t Lo = Offset >= 0 ? 0 : (-Offset + Stride - 1) / Stride;
    int64_t Hi = W.In[Last] - Offset <= 0
                     ? 0
                     : (W.In[Last] - Offset + Stride - 1) / Stride;
    Lo = std::min(Lo, OutLast);
    Hi = std::max(Lo, std::min(Hi, OutLast));
    Shape OutIndex(Last, 0);
    for (int64_t O = 0; O != Outer; ++O) {
      T *Run = Dst + O * OutLast;
      bool Inside = true;
      int64_t Base = 0;
      for (unsigned D = 0; D != Last && Inside; ++D) {
        int64_t I = OutIndex[D] * W.Strides[D] - W.PadBegin[D] +
                    Tap[D] * W.Dilations[D];
        Inside = I >= 0 && I < W.In[D];
        Base += I * InStrides[D];
      }
      if (!Inside) {
        std::fill(Run, Run + OutLast, T(0));
      } else {
        std::fill(Run, Run + Lo, T(0));
        if (Stride == 1)
          std::memcpy(Run + Lo, XC + Base + Offset + Lo, (Hi - Lo) * sizeof(T));
        else
          for (int64_t J = Lo; J != Hi; ++J)
            Run[J] = XC[Base + Offset + J * Stride];
        std::fill(Run + Hi, Run + OutLast, T(0));
      }
      for (unsigned D = Last; D-- > 0;) {
        if (++OutIndex[D] != W.Out[D])
          break;
        OutIndex[D] = 0;
      }
    }
  });
}

namespace {

/// The sizes both convolutions check: X [N, C, ...], W [M, C / group, ...],
/// the window, Y's shape, and the per-group GEMM sizes.
struct ConvGeometry {
  int64_t N, C, M, Group, GroupChannels, GroupM, Rows, InSize, OutSize;
  bool Unfold;
  SlidingWindow Window;
};

Expected<ConvGeometry> getConvGeometry(const KernelArgs &A) {
  const Tensor &X = A.In[0], &Wt = A.In[1];
  if (X.getRank() < 3 || Wt.getRank() != X.getRank())
    return A.error("operands " + X.getTypeString() + " and " +
                   Wt.getTypeString() +
                   " must have the same rank, 3 or more (batch, channel, "
                   "spatial dimensions)");
  ConvGeometry G;
  G.Group = A.intAttr("group", 1);
  if (G.Group < 1)
    return A.error("'group' must be positive, got " + Twine(G.Group));
  G.N = X.getShape()[0], G.C = X.getShape()[1];
  G.M = Wt.getShape()[0], G.GroupChannels = Wt.getShape()[1];
  if (G.C != G.GroupChannels * G.Group || G.M % G.Group != 0)
    return A.error("operand 0 " + X.getTypeString() + " and weights " +
                   Wt.getTypeString() + " do not fit 'group' " +
                   Twine(G.Group));
  ArrayRef<int64_t> Kernel = Wt.getShape().drop_front(2);
  if (const Attribute *K = A.attr("kernel_shape"))
    if (!K->isa(Attribute::Kind::IntList) || K->getIntList() != Kernel)
      return A.error("'kernel_shape' does not match the weights " +
                     Wt.getTypeString());
  Expected<SlidingWindow> W = getSlidingWindow(A, Kernel, /*CeilMode=*/false);
  if (!W)
    return W.takeError();
  G.Window = std::move(*W);
  Shape YShape = {G.N, G.M};
  YShape.append(G.Window.Out.begin(), G.Window.Out.end());
  if (Error E = A.checkShape(0, YShape))
    return E;
  G.InSize = getNumElements(G.Window.In), G.OutSize = G.Window.getOutSize();
  G.Rows = G.GroupChannels * G.Window.getKernelSize(), G.GroupM = G.M / G.Group;
  for (int64_t S : {G.Rows, G.OutSize, G.GroupM})
    if (S > INT_MAX)
      return A.error("a GEMM dimension of " + Twine(S) +
                     " exceeds what CBLAS takes");
  G.Unfold = false;
  for (unsigned D = 0; D != G.Window.getNumSpatial(); ++D)
    G.Unfold |= G.Window.Kernel[D] != 1 || G.Window.Strides[D] != 1 ||
                G.Window.PadBegin[D] != 0 || G.Window.PadEnd[D] != 0;
  return G;
}

} // namespace

Error autopar::runConv(const KernelArgs &A) {
  if (Error E = checkF32Operands(A))
    return E;
  Expected<ConvGeometry> G = getConvGeometry(A);
  if (!G)
    return G.takeError();
  if (A.has(2) && A.In[2].getShape() != ArrayRef<int64_t>(G->M))
    return A.error("the bias " + A.In[2].getTypeString() +
                   " must have shape [" + Twine(G->M) + "]");
  std::vector<float> Col(G->Unfold ? G->Rows * G->OutSize : 0);
  const float *XD = A.In[0].data<float>(), *WD = A.In[1].data<float>();
  const float *BD = A.has(2) ? A.In[2].data<float>() : nullptr;
  float *YD = A.Out[0].data<float>();
  for (int64_t Image = 0; Image != G->N; ++Image)
    for (int64_t Gr = 0; Gr != G->Group; ++Gr) {
      const float *XG = XD + (Image * G->C + Gr * G->GroupChannels) * G->InSize;
      if (G->Unfold)
        im2col(XG, G->Window, G->GroupChannels, Col.data());
      float *YG = YD + (Image * G->M + Gr * G->GroupM) * G->OutSize;
      sgemm(false, false, G->GroupM, G->OutSize, G->Rows, 1.0f,
            WD + Gr * G->GroupM * G->Rows, G->Unfold ? Col.data() : XG, 0.0f,
            YG);
      if (BD)
        for (int64_t Out = 0; Out != G->GroupM; ++Out) {
          float Bias = BD[Gr * G->GroupM + Out];
          float *Row = YG + Out * G->OutSize;
          for (int64_t J = 0; J != G->OutSize; ++J)
            Row[J] += Bias;
        }
    }
  return Error::success();
}

/// ConvInteger: the codes minus their zero points as doubles (exact), the
/// same unfolding and a double GEMM, whose sums (below 2^53) are exact
/// integers.
Error autopar::runConvInteger(const KernelArgs &A) {
  for (unsigned I = 0; I != 4; ++I)
    if (A.has(I))
      if (Error E = A.checkType(I, {ElementType::U8, ElementType::I8}))
        return E;
  Expected<ConvGeometry> G = getConvGeometry(A);
  if (!G)
    return G.takeError();
  const Tensor &X = A.In[0], &Wt = A.In[1];
  double XZero = A.has(2) ? *numberAt(A.In[2], 0) : 0;
  bool PerChannel = A.has(3) && A.In[3].getNumElements() == G->M && G->M > 1;
  std::vector<double> XD(size_t(X.getNumElements())),
      WD(size_t(Wt.getNumElements()));
  for (size_t I = 0; I != XD.size(); ++I)
    XD[I] = *numberAt(X, int64_t(I)) - XZero;
  int64_t PerOut = G->Rows;
  for (size_t I = 0; I != WD.size(); ++I) {
    double Zero = !A.has(3)    ? 0
                  : PerChannel ? *numberAt(A.In[3], int64_t(I) / PerOut)
                               : *numberAt(A.In[3], 0);
    WD[I] = *numberAt(Wt, int64_t(I)) - Zero;
  }
  std::vector<double> Col(G->Unfold ? G->Rows * G->OutSize : 0),
      Y(size_t(G->GroupM * G->OutSize));
  int32_t *YD = A.Out[0].data<int32_t>();
  for (int64_t Image = 0; Image != G->N; ++Image)
    for (int64_t Gr = 0; Gr != G->Group; ++Gr) {
      const double *XG =
          XD.data() + (Image * G->C + Gr * G->GroupChannels) * G->InSize;
      if (G->Unfold)
        im2col(XG, G->Window, G->GroupChannels, Col.data());
      cblas_dgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, int(G->GroupM),
                  int(G->OutSize), int(G->Rows), 1.0,
                  WD.data() + Gr * G->GroupM * G->Rows, int(G->Rows),
                  G->Unfold ? Col.data() : XG, int(G->OutSize), 0.0, Y.data(),
                  int(G->OutSize));
      int32_t *YG = YD + (Image * G->M + Gr * G->GroupM) * G->OutSize;
      for (size_t I = 0; I != Y.size(); ++I)
        YG[I] = int32_t(Y[I]);
    }
  return Error::success();
}
