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
static void im2col(const float *X, const SlidingWindow &W, int64_t Channels,
                   float *Col) {
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
    const float *XC = X + Row / KernelSize * InSize;
    float *Dst = Col + Row * OutSize;
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
      float *Run = Dst + O * OutLast;
      bool Inside = true;
      int64_t Base = 0;
      for (unsigned D = 0; D != Last && Inside; ++D) {
        int64_t I = OutIndex[D] * W.Strides[D] - W.PadBegin[D] +
                    Tap[D] * W.Dilations[D];
        Inside = I >= 0 && I < W.In[D];
        Base += I * InStrides[D];
      }
      if (!Inside) {
        std::fill(Run, Run + OutLast, 0.0f);
      } else {
        std::fill(Run, Run + Lo, 0.0f);
        if (Stride == 1)
          std::memcpy(Run + Lo, XC + Base + Offset + Lo,
                      (Hi - Lo) * sizeof(float));
        else
          for (int64_t J = Lo; J != Hi; ++J)
            Run[J] = XC[Base + Offset + J * Stride];
        std::fill(Run + Hi, Run + OutLast, 0.0f);
      }
      for (unsigned D = Last; D-- > 0;) {
        if (++OutIndex[D] != W.Out[D])
          break;
        OutIndex[D] = 0;
      }
    }
  });
}

Error autopar::runConv(const KernelArgs &A) {
  if (Error E = checkF32Operands(A))
    return E;
  const Tensor &X = A.In[0], &Wt = A.In[1];
  if (X.getRank() < 3 || Wt.getRank() != X.getRank())
    return A.error("operands " + X.getTypeString() + " and " +
                   Wt.getTypeString() +
                   " must have the same rank, 3 or more (batch, channel, "
                   "spatial dimensions)");
  int64_t Group = A.intAttr("group", 1);
  if (Group < 1)
    return A.error("'group' must be positive, got " + Twine(Group));
  int64_t N = X.getShape()[0], C = X.getShape()[1];
  int64_t M = Wt.getShape()[0], GroupChannels = Wt.getShape()[1];
  if (C != GroupChannels * Group || M % Group != 0)
    return A.error("operand 0 " + X.getTypeString() + " and weights " +
                   Wt.getTypeString() + " do not fit 'group' " + Twine(Group));
  ArrayRef<int64_t> Kernel = Wt.getShape().drop_front(2);
  if (const Attribute *K = A.attr("kernel_shape"))
    if (!K->isa(Attribute::Kind::IntList) || K->getIntList() != Kernel)
      return A.error("'kernel_shape' does not match the weights " +
                     Wt.getTypeString());
  if (A.has(2) && A.In[2].getShape() != ArrayRef<int64_t>(M))
    return A.error("the bias " + A.In[2].getTypeString() +
                   " must have shape [" + Twine(M) + "]");
  Expected<SlidingWindow> W = getSlidingWindow(A, Kernel, /*CeilMode=*/false);
  if (!W)
    return W.takeError();
  Shape YShape = {N, M};
  YShape.append(W->Out.begin(), W->Out.end());
  if (Error E = A.checkShape(0, YShape))
    return E;

  int64_t InSize = getNumElements(W->In), OutSize = W->getOutSize();
  int64_t Rows = GroupChannels * W->getKernelSize(), GroupM = M / Group;
  for (int64_t S : {Rows, OutSize, GroupM})
    if (S > INT_MAX)
      return A.error("a GEMM dimension of " + Twine(S) +
                     " exceeds what CBLAS takes");
  bool Unfold = false;
  for (unsigned D = 0; D != W->getNumSpatial(); ++D)
    Unfold |= W->Kernel[D] != 1 || W->Strides[D] != 1 || W->PadBegin[D] != 0 ||
              W->PadEnd[D] != 0;
  std::vector<float> Col(Unfold ? Rows * OutSize : 0);
  const float *XD = X.data<float>(), *WD = Wt.data<float>();
  const float *BD = A.has(2) ? A.In[2].data<float>() : nullptr;
  float *YD = A.Out[0].data<float>();
  for (int64_t Image = 0; Image != N; ++Image)
    for (int64_t G = 0; G != Group; ++G) {
      const float *XG = XD + (Image * C + G * GroupChannels) * InSize;
      if (Unfold)
        im2col(XG, *W, GroupChannels, Col.data());
      float *YG = YD + (Image * M + G * GroupM) * OutSize;
      sgemm(false, false, GroupM, OutSize, Rows, 1.0f, WD + G * GroupM * Rows,
            Unfold ? Col.data() : XG, 0.0f, YG);
      if (BD)
        for (int64_t Out = 0; Out != GroupM; ++Out) {
          float Bias = BD[G * GroupM + Out];
          float *Row = YG + Out * OutSize;
          for (int64_t J = 0; J != OutSize; ++J)
            Row[J] += Bias;
        }
    }
  return Error::success();
}
