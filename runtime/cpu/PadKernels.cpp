//===- PadKernels.cpp - Pad, the depth shuffles, ReverseSequence ---------===//
//
// All move elements of any type. Pad maps each result index to a source
// index per axis: the constant where it falls outside (constant mode), the
// nearest edge (edge), the mirror image without repeating the edge
// (reflect, periodic for pads longer than the axis, as numpy.pad), or the
// index modulo the size (wrap). Negative pads crop.
//
//===----------------------------------------------------------------------===//

#include "runtime/cpu/Kernels.h"

#include "ir/Graph.h"

#include "llvm/ADT/StringSwitch.h"

#include <cstring>

using namespace autopar;
using namespace llvm;

namespace {
enum class PadMode { Constant, Reflect, Edge, Wrap };
} // namespace

/// The source index of result index J along an axis of size Len padded by
/// Begin in front; -1 for the constant.
static int64_t sourceIndex(int64_t J, int64_t Begin, int64_t Len,
                           PadMode Mode) {
  int64_t I = J - Begin;
  if (I >= 0 && I < Len)
    return I;
  switch (Mode) {
  case PadMode::Constant:
    return -1;
  case PadMode::Edge:
    return I < 0 ? 0 : Len - 1;
  case PadMode::Wrap:
    return ((I % Len) + Len) % Len;
  case PadMode::Reflect: {
    if (Len == 1)
      return 0;
    int64_t Period = 2 * (Len - 1);
    int64_t M = ((I % Period) + Period) % Period;
    return M < Len ? M : Period - M;
  }
  }
  return -1;
}

Error autopar::runPad(const KernelArgs &A) {
  const Tensor &X = A.In[0], &Y = A.Out[0];
  unsigned Rank = X.getRank();
  StringRef ModeName = A.stringAttr("mode", "constant");
  PadMode Mode = StringSwitch<PadMode>(ModeName)
                     .Case("reflect", PadMode::Reflect)
                     .Case("edge", PadMode::Edge)
                     .Case("wrap", PadMode::Wrap)
                     .Default(PadMode::Constant);
  Expected<Shape> Pads = A.readInts(1);
  if (!Pads)
    return Pads.takeError();
  SmallVector<unsigned, 4> Axes;
  if (A.has(3)) {
    Expected<Shape> Given = A.readInts(3);
    if (!Given)
      return Given.takeError();
    for (int64_t Axis : *Given) {
      Expected<unsigned> Norm = A.normalizeAxis(Axis, Rank);
      if (!Norm)
        return Norm.takeError();
      Axes.push_back(*Norm);
    }
  } else {
    for (unsigned I = 0; I != Rank; ++I)
      Axes.push_back(I);
  }
  if (Pads->size() != 2 * Axes.size())
    return A.error("pads has " + Twine(Pads->size()) + " entries for " +
                   Twine(Axes.size()) + " axes");
  Shape Begin(Rank, 0), Out = toShape(X.getShape());
  for (size_t I = 0, E = Axes.size(); I != E; ++I) {
    Begin[Axes[I]] = (*Pads)[I];
    Out[Axes[I]] += (*Pads)[I] + (*Pads)[I + E];
    if (Out[Axes[I]] < 0)
      return A.error("pads leave axis " + Twine(Axes[I]) + " negative");
    if (Mode != PadMode::Constant && Out[Axes[I]] && !X.getDim(Axes[I]))
      return A.error("mode '" + ModeName + "' cannot pad an empty axis");
  }
  if (Error E = A.checkShape(0, Out))
    return E;
  if (Error E = A.checkResultType(0, {X.getElementType()}))
    return E;
  size_t Size = getElementSize(X.getElementType());
  SmallVector<char, 16> Fill(Size, 0);
  if (A.has(2)) {
    if (A.In[2].getElementType() != X.getElementType() ||
        A.In[2].getNumElements() != 1)
      return A.error("constant_value must be one element of data's type");
    std::memcpy(Fill.data(), A.In[2].getData(), Size);
  }
  // Per result index, the source offset; a source index of -1 on any axis
  // is the constant.
  Shape Strides = getStrides(X.getShape());
  Shape Index(Rank, 0);
  char *Dst = Y.data<char>();
  for (int64_t N = Y.getNumElements(); N; --N, Dst += Size) {
    int64_t Offset = 0;
    bool Inside = true;
    for (unsigned D = 0; D != Rank && Inside; ++D) {
      int64_t S = sourceIndex(Index[D], Begin[D], X.getDim(D), Mode);
      Inside = S >= 0;
      Offset += S * Strides[D];
    }
    std::memcpy(Dst, Inside ? X.data<char>() + Offset * Size : Fill.data(),
                Size);
    for (unsigned D = Rank; D-- > 0;) {
      if (++Index[D] < Out[D])
        break;
      Index[D] = 0;
    }
  }
  return Error::success();
}

// SpaceToDepth: out[n, (bh * b + bw) * C + c, h, w] = in[n, c, h * b + bh,
// w * b + bw]. DepthToSpace is its inverse: DCR reads channel (bh * b + bw)
// * C' + c, CRD channel c * b * b + bh * b + bw.
Error autopar::runDepthSpace(const KernelArgs &A) {
  const Tensor &X = A.In[0], &Y = A.Out[0];
  bool ToDepth = A.N.getOp() == OpId::SpaceToDepth;
  int64_t B = A.intAttr("blocksize", 0);
  if (X.getRank() != 4 || B <= 0)
    return A.error("input " + X.getTypeString() +
                   " must be 4-D and blocksize positive");
  int64_t N = X.getDim(0), C = X.getDim(1), H = X.getDim(2), W = X.getDim(3);
  // The space side [N, C', H', W'] (C' = C of SpaceToDepth's input).
  int64_t SC = ToDepth ? C : C / (B * B);
  int64_t SH = ToDepth ? H : H * B, SW = ToDepth ? W : W * B;
  if (ToDepth ? (H % B || W % B) : C % (B * B))
    return A.error("input " + X.getTypeString() +
                   " does not divide into blocks of " + Twine(B));
  Shape Out =
      ToDepth ? Shape{N, C * B * B, H / B, W / B} : Shape{N, SC, SH, SW};
  if (Error E = A.checkShape(0, Out))
    return E;
  if (Error E = A.checkResultType(0, {X.getElementType()}))
    return E;
  bool CRD = !ToDepth && A.stringAttr("mode", "DCR") == "CRD";
  size_t Size = getElementSize(X.getElementType());
  int64_t DH = SH / B, DW = SW / B, DC = SC * B * B;
  // Walk the space side; Depth is the offset of the same element on the
  // depth side [N, DC, DH, DW].
  int64_t Space = 0;
  for (int64_t In = 0; In != N; ++In)
    for (int64_t Ic = 0; Ic != SC; ++Ic)
      for (int64_t Ih = 0; Ih != SH; ++Ih)
        for (int64_t Iw = 0; Iw != SW; ++Iw, ++Space) {
          int64_t Bh = Ih % B, Bw = Iw % B;
          int64_t Channel =
              CRD ? Ic * B * B + Bh * B + Bw : (Bh * B + Bw) * SC + Ic;
          int64_t Depth = ((In * DC + Channel) * DH + Ih / B) * DW + Iw / B;
          const char *Src = X.data<char>() + (ToDepth ? Space : Depth) * Size;
          char *Dst = Y.data<char>() + (ToDepth ? Depth : Space) * Size;
          std::memcpy(Dst, Src, Size);
        }
  return Error::success();
}

// ReverseSequence: batch and time are axes 0 and 1 (either order) and the
// rest, [2, rank), one block of Inner elements. Entry b's first
// sequence_lens[b] steps are reversed, the rest copied; a length outside
// [0, time] is an error (as in onnxruntime).
Error autopar::runReverseSequence(const KernelArgs &A) {
  const Tensor &X = A.In[0], &Y = A.Out[0];
  int64_t BatchAxis = A.intAttr("batch_axis", 1);
  if (X.getRank() < 2 || (BatchAxis != 0 && BatchAxis != 1) ||
      A.intAttr("time_axis", 0) != 1 - BatchAxis)
    return A.error("input " + X.getTypeString() +
                   " must have batch and time axes 0 and 1");
  if (Error E = A.checkShape(0, X.getShape()))
    return E;
  if (Error E = A.checkResultType(0, {X.getElementType()}))
    return E;
  Expected<Shape> Lens = A.readInts(1);
  if (!Lens)
    return Lens.takeError();
  int64_t Batch = X.getDim(BatchAxis), Time = X.getDim(1 - BatchAxis);
  if (int64_t(Lens->size()) != Batch)
    return A.error("sequence_lens has " + Twine(Lens->size()) +
                   " entries for a batch of " + Twine(Batch));
  size_t Block = getElementSize(X.getElementType()) *
                 getNumElements(X.getShape().drop_front(2));
  // Offset of (b, t) in blocks.
  auto At = [&](int64_t B, int64_t T) {
    return BatchAxis == 0 ? B * Time + T : T * Batch + B;
  };
  for (int64_t B = 0; B != Batch; ++B) {
    int64_t Len = (*Lens)[B];
    if (Len < 0 || Len > Time)
      return A.error("sequence length " + Twine(Len) + " of batch entry " +
                     Twine(B) + " is outside [0, " + Twine(Time) + "]");
    for (int64_t T = 0; T != Time; ++T) {
      int64_t From = T < Len ? Len - 1 - T : T;
      std::memcpy(Y.data<char>() + At(B, T) * Block,
                  X.data<char>() + At(B, From) * Block, Block);
    }
  }
  return Error::success();
}
