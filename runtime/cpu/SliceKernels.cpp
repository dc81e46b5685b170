//===- SliceKernels.cpp - Concat, Split, Slice and Gather -----------------===//
//
// Element-type agnostic copies of contiguous blocks. Split takes sizes
// from its `split` operand, else `num_outputs` parts of ceil(size / n)
// (the last one smaller), else equal parts, one per result. Slice clamps
// starts and ends as ONNX does and takes any non-zero steps. Gather takes
// i64 or i32 indices; negative ones count from the end, and one out of
// range is an error.
//
//===----------------------------------------------------------------------===//

#include "runtime/cpu/Kernels.h"

#include "ir/Graph.h"

#include <algorithm>
#include <cstdint>
#include <cstring>

using namespace autopar;
using namespace llvm;

Error autopar::runConcat(const KernelArgs &A) {
  const Tensor &First = A.In[0], &Y = A.Out[0];
  Expected<unsigned> Axis =
      A.normalizeAxis(A.intAttr("axis", 0), First.getRank());
  if (!Axis)
    return Axis.takeError();
  Shape Out = toShape(First.getShape());
  Out[*Axis] = 0;
  for (const Tensor &X : A.In) {
    bool Fits = X.getRank() == First.getRank() &&
                X.getElementType() == First.getElementType();
    for (unsigned D = 0; Fits && D != X.getRank(); ++D)
      Fits = D == *Axis || X.getDim(D) == First.getDim(D);
    if (!Fits)
      return A.error("operands " + First.getTypeString() + " and " +
                     X.getTypeString() + " do not concatenate along axis " +
                     Twine(*Axis));
    Out[*Axis] += X.getDim(*Axis);
  }
  if (Error E = A.checkShape(0, Out))
    return E;
  if (Error E = A.checkResultType(0, {First.getElementType()}))
    return E;
  size_t Size = getElementSize(First.getElementType());
  int64_t Outer = getNumElements(First.getShape().take_front(*Axis));
  char *Dst = Y.data<char>();
  for (int64_t O = 0; O != Outer; ++O)
    for (const Tensor &X : A.In) {
      size_t Chunk = getNumElements(X.getShape().drop_front(*Axis)) * Size;
      if (Chunk)
        std::memcpy(Dst, X.data<char>() + O * Chunk, Chunk);
      Dst += Chunk;
    }
  return Error::success();
}

static Expected<Shape> getSplitSizes(const KernelArgs &A, int64_t Len) {
  size_t Parts = A.Out.size();
  if (A.has(1)) {
    Expected<Shape> Sizes = A.readInts(1);
    if (!Sizes)
      return Sizes.takeError();
    int64_t Sum = 0;
    for (int64_t S : *Sizes)
      Sum += S < 0 ? -1 : S;
    if (Sizes->size() != Parts || Sum != Len)
      return A.error("'split' must give " + Twine(Parts) +
                     " non-negative sizes that sum to " + Twine(Len));
    return Sizes;
  }
  Shape Sizes;
  if (A.attr("num_outputs")) {
    int64_t N = A.intAttr("num_outputs", 0);
    if (N <= 0 || size_t(N) != Parts)
      return A.error("'num_outputs' is " + Twine(N) + " for " + Twine(Parts) +
                     " results");
    int64_t Chunk = (Len + N - 1) / N;
    for (int64_t I = 0, Left = Len; I != N; ++I, Left -= Chunk)
      Sizes.push_back(std::clamp<int64_t>(Left, 0, Chunk));
    return Sizes;
  }
  if (Len % int64_t(Parts))
    return A.error("dimension " + Twine(Len) + " does not split into " +
                   Twine(Parts) + " equal parts");
  Sizes.assign(Parts, Len / int64_t(Parts));
  return Sizes;
}

Error autopar::runSplit(const KernelArgs &A) {
  const Tensor &X = A.In[0];
  Expected<unsigned> Axis = A.normalizeAxis(A.intAttr("axis", 0), X.getRank());
  if (!Axis)
    return Axis.takeError();
  Expected<Shape> Sizes = getSplitSizes(A, X.getDim(*Axis));
  if (!Sizes)
    return Sizes.takeError();
  size_t Size = getElementSize(X.getElementType());
  int64_t Outer = getNumElements(X.getShape().take_front(*Axis));
  size_t Inner = getNumElements(X.getShape().drop_front(*Axis + 1)) * Size;
  size_t InRow = X.getDim(*Axis) * Inner;
  int64_t Start = 0;
  for (unsigned I = 0; I != A.Out.size(); ++I) {
    Shape Out = toShape(X.getShape());
    Out[*Axis] = (*Sizes)[I];
    if (Error E = A.checkShape(I, Out))
      return E;
    if (Error E = A.checkResultType(I, {X.getElementType()}))
      return E;
    size_t Chunk = (*Sizes)[I] * Inner;
    for (int64_t O = 0; O != Outer && Chunk; ++O)
      std::memcpy(A.Out[I].data<char>() + O * Chunk,
                  X.data<char>() + O * InRow + Start * Inner, Chunk);
    Start += (*Sizes)[I];
  }
  return Error::success();
}

Error autopar::runSlice(const KernelArgs &A) {
  const Tensor &X = A.In[0], &Y = A.Out[0];
  unsigned Rank = X.getRank();
  Expected<Shape> Starts = A.readInts(1);
  if (!Starts)
    return Starts.takeError();
  Expected<Shape> Ends = A.readInts(2);
  if (!Ends)
    return Ends.takeError();
  Shape Axes, Steps(Starts->size(), 1);
  if (A.has(3)) {
    Expected<Shape> Given = A.readInts(3);
    if (!Given)
      return Given.takeError();
    Axes = std::move(*Given);
  } else {
    for (unsigned I = 0; I != Starts->size(); ++I)
      Axes.push_back(I);
  }
  if (A.has(4)) {
    Expected<Shape> Given = A.readInts(4);
    if (!Given)
      return Given.takeError();
    Steps = std::move(*Given);
  }
  if (Ends->size() != Starts->size() || Axes.size() != Starts->size() ||
      Steps.size() != Starts->size())
    return A.error("starts, ends, axes and steps have different lengths");
  Shape Out = toShape(X.getShape()), InStrides = getStrides(X.getShape());
  Shape Strides(InStrides);
  SmallVector<bool, 4> Seen(Rank, false);
  int64_t Base = 0;
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
    Out[*D] = Count;
    if (Count) {
      Base += Start * InStrides[*D];
      Strides[*D] = InStrides[*D] * Step;
    }
  }
  if (Error E = A.checkShape(0, Out))
    return E;
  if (Error E = A.checkResultType(0, {X.getElementType()}))
    return E;
  StridedWalk Walk(Out, {Strides}, {Base});
  copyStrided(Y.data<char>(), X.data<char>(),
              getElementSize(X.getElementType()), Y.getNumElements(), Walk, 0);
  return Error::success();
}

Error autopar::runGather(const KernelArgs &A) {
  const Tensor &X = A.In[0], &Indices = A.In[1], &Y = A.Out[0];
  if (Error E = A.checkType(1, {ElementType::I64, ElementType::I32}))
    return E;
  Expected<unsigned> Axis = A.normalizeAxis(A.intAttr("axis", 0), X.getRank());
  if (!Axis)
    return Axis.takeError();
  Shape Out = toShape(X.getShape().take_front(*Axis));
  Out.append(Indices.getShape().begin(), Indices.getShape().end());
  Out.append(X.getShape().begin() + *Axis + 1, X.getShape().end());
  if (Error E = A.checkShape(0, Out))
    return E;
  if (Error E = A.checkResultType(0, {X.getElementType()}))
    return E;
  size_t Size = getElementSize(X.getElementType());
  int64_t Outer = getNumElements(X.getShape().take_front(*Axis));
  int64_t Len = X.getDim(*Axis), Count = Indices.getNumElements();
  size_t Inner = getNumElements(X.getShape().drop_front(*Axis + 1)) * Size;
  bool I64 = Indices.getElementType() == ElementType::I64;
  char *Dst = Y.data<char>();
  for (int64_t O = 0; O != Outer; ++O)
    for (int64_t I = 0; I != Count; ++I, Dst += Inner) {
      int64_t Index =
          I64 ? Indices.data<int64_t>()[I] : Indices.data<int32_t>()[I];
      if (Index < -Len || Index >= Len)
        return A.error("index " + Twine(Index) + " is out of range for " +
                       "dimension " + Twine(*Axis) + " of size " + Twine(Len));
      if (Index < 0)
        Index += Len;
      if (Inner)
        std::memcpy(Dst, X.data<char>() + (O * Len + Index) * Inner, Inner);
    }
  return Error::success();
}
