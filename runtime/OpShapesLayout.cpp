//===- OpShapesLayout.cpp - Shape plans of ops that move elements ---------===//
//
// See OpShapes.h: Transpose and Slice as strided views, Concat, Gather and
// its gradient.
//
//===----------------------------------------------------------------------===//

#include "runtime/OpShapes.h"

#include "ir/Graph.h"

#include <algorithm>
#include <cstdint>

using namespace autopar;
using namespace llvm;

Expected<StridedView> autopar::planTranspose(const KernelArgs &A) {
  const Tensor &X = A.In[0];
  unsigned Rank = X.getRank();
  Shape Perm;
  if (const Attribute *P = A.attr("perm")) {
    Perm.assign(P->getIntList().begin(), P->getIntList().end());
  } else {
    for (unsigned I = 0; I != Rank; ++I)
      Perm.push_back(Rank - 1 - I);
  }
  if (Perm.size() != Rank)
    return A.error("'perm' has " + Twine(Perm.size()) + " entries for rank " +
                   Twine(Rank));
  SmallVector<bool, 4> Seen(Rank, false);
  Shape InStrides = getStrides(X.getShape());
  StridedView V;
  for (int64_t P : Perm) {
    if (P < 0 || P >= int64_t(Rank) || Seen[P])
      return A.error("'perm' is not a permutation");
    Seen[P] = true;
    V.Out.push_back(X.getDim(P));
    V.Strides.push_back(InStrides[P]);
  }
  if (Error E = A.checkShape(0, V.Out))
    return E;
  return V;
}

Expected<StridedView> autopar::planSlice(const KernelArgs &A,
                                         IntOperandReader ReadInts) {
  const Tensor &X = A.In[0];
  unsigned Rank = X.getRank();
  Expected<Shape> Starts = ReadInts(1);
  if (!Starts)
    return Starts.takeError();
  Expected<Shape> Ends = ReadInts(2);
  if (!Ends)
    return Ends.takeError();
  Shape Axes, Steps(Starts->size(), 1);
  if (A.has(3)) {
    Expected<Shape> Given = ReadInts(3);
    if (!Given)
      return Given.takeError();
    Axes = std::move(*Given);
  } else {
    for (unsigned I = 0; I != Starts->size(); ++I)
      Axes.push_back(I);
  }
  if (A.has(4)) {
    Expected<Shape> Given = ReadInts(4);
    if (!Given)
      return Given.takeError();
    Steps = std::move(*Given);
  }
  if (Ends->size() != Starts->size() || Axes.size() != Starts->size() ||
      Steps.size() != Starts->size())
    return A.error("starts, ends, axes and steps have different lengths");
  Shape InStrides = getStrides(X.getShape());
  StridedView V;
  V.Out = toShape(X.getShape());
  V.Strides = InStrides;
  SmallVector<bool, 4> Seen(Rank, false);
  for (size_t I = 0; I != Axes.size(); ++I) {
    Expected<unsigned> D = A.normalizeAxis(Axes[I], Rank);
    if (!D)
      return D.takeError();
    if (Seen[*D])
      return A.error("axis " + Twine(Axes[I]) + " is repeated");
    Seen[*D] = true;
    int64_t Dim = X.getDim(*D), Step = Steps[I];
    if (Step == 0 || Step == INT64_MIN)
      return A.error("a step is " + Twine(Step));
    int64_t Start = (*Starts)[I], End = (*Ends)[I];
    if (Start < 0)
      Start += Dim;
    if (End < 0)
      End += Dim;
    int64_t Count;
    if (Dim == 0) {
      Count = 0;
    } else if (Step > 0) {
      Start = std::clamp<int64_t>(Start, 0, Dim);
      End = std::clamp<int64_t>(End, 0, Dim);
      Count = End > Start ? (End - Start - 1) / Step + 1 : 0;
    } else {
      Start = std::clamp<int64_t>(Start, 0, Dim - 1);
      End = std::clamp<int64_t>(End, -1, Dim - 1);
      Count = Start > End ? (Start - End - 1) / -Step + 1 : 0;
    }
    V.Out[*D] = Count;
    if (Count) {
      V.Base += Start * InStrides[*D];
      V.Strides[*D] = InStrides[*D] * Step;
    }
  }
  if (Error E = A.checkShape(0, V.Out))
    return E;
  return V;
}

Expected<ConcatPlan> autopar::planConcat(const KernelArgs &A) {
  const Tensor &First = A.In[0];
  Expected<unsigned> Axis =
      A.normalizeAxis(A.intAttr("axis", 0), First.getRank());
  if (!Axis)
    return Axis.takeError();
  ConcatPlan P;
  P.Axis = *Axis;
  P.Out = toShape(First.getShape());
  P.Out[*Axis] = 0;
  for (const Tensor &X : A.In) {
    bool Fits = X.getRank() == First.getRank() &&
                X.getElementType() == First.getElementType();
    for (unsigned D = 0; Fits && D != X.getRank(); ++D)
      Fits = D == *Axis || X.getDim(D) == First.getDim(D);
    if (!Fits)
      return A.error("operands " + First.getTypeString() + " and " +
                     X.getTypeString() + " do not concatenate along axis " +
                     Twine(*Axis));
    P.Out[*Axis] += X.getDim(*Axis);
  }
  if (Error E = A.checkShape(0, P.Out))
    return E;
  return P;
}

/// Operand 0's extents around `axis` (default 0), with Count operand 1's
/// elements.
static Expected<GatherPlan> getGatherExtents(const KernelArgs &A) {
  Expected<AxisExtents> X = planAxis(A, 0, 0);
  if (!X)
    return X.takeError();
  GatherPlan P;
  P.Axis = X->Axis;
  P.Outer = X->Outer;
  P.Len = X->Len;
  P.Inner = X->Inner;
  P.Count = A.In[1].getNumElements();
  return P;
}

Expected<GatherPlan> autopar::planGather(const KernelArgs &A) {
  const Tensor &X = A.In[0], &Indices = A.In[1];
  Expected<GatherPlan> P = getGatherExtents(A);
  if (!P)
    return P.takeError();
  Shape Out = toShape(X.getShape().take_front(P->Axis));
  Out.append(Indices.getShape().begin(), Indices.getShape().end());
  Out.append(X.getShape().begin() + P->Axis + 1, X.getShape().end());
  if (Error E = A.checkShape(0, Out))
    return E;
  return P;
}

Expected<GatherPlan> autopar::planGatherGrad(const KernelArgs &A) {
  const Tensor &Data = A.In[0], &DY = A.In[2];
  Expected<GatherPlan> P = getGatherExtents(A);
  if (!P)
    return P.takeError();
  if (Error E = A.checkShape(0, Data.getShape()))
    return E;
  if (DY.getNumElements() != P->Outer * P->Count * P->Inner)
    return A.error("dY " + DY.getTypeString() +
                   " is not the shape of Gather(data, indices)");
  return P;
}
