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

#include "runtime/OpShapes.h"
#include "runtime/cpu/Kernels.h"

#include "ir/Graph.h"

#include <algorithm>
#include <cstdint>
#include <cstring>

using namespace autopar;
using namespace llvm;

Error autopar::runConcat(const KernelArgs &A) {
  const Tensor &First = A.In[0], &Y = A.Out[0];
  Expected<ConcatPlan> P = planConcat(A);
  if (!P)
    return P.takeError();
  unsigned Axis = P->Axis;
  if (Error E = A.checkResultType(0, {First.getElementType()}))
    return E;
  size_t Size = getElementSize(First.getElementType());
  int64_t Outer = getNumElements(First.getShape().take_front(Axis));
  char *Dst = Y.data<char>();
  for (int64_t O = 0; O != Outer; ++O)
    for (const Tensor &X : A.In) {
      size_t Chunk = getNumElements(X.getShape().drop_front(Axis)) * Size;
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
  Expected<StridedView> V =
      planSlice(A, [&](unsigned I) { return A.readInts(I); });
  if (!V)
    return V.takeError();
  if (Error E = A.checkResultType(0, {X.getElementType()}))
    return E;
  StridedWalk Walk(V->Out, {V->Strides}, {V->Base});
  copyStrided(Y.data<char>(), X.data<char>(),
              getElementSize(X.getElementType()), Y.getNumElements(), Walk, 0);
  return Error::success();
}

Error autopar::runGather(const KernelArgs &A) {
  const Tensor &X = A.In[0], &Indices = A.In[1], &Y = A.Out[0];
  if (Error E = A.checkType(1, {ElementType::I64, ElementType::I32}))
    return E;
  Expected<GatherPlan> P = planGather(A);
  if (!P)
    return P.takeError();
  if (Error E = A.checkResultType(0, {X.getElementType()}))
    return E;
  size_t Size = getElementSize(X.getElementType());
  int64_t Outer = P->Outer, Len = P->Len, Count = P->Count;
  size_t Inner = P->Inner * Size;
  bool I64 = Indices.getElementType() == ElementType::I64;
  char *Dst = Y.data<char>();
  for (int64_t O = 0; O != Outer; ++O)
    for (int64_t I = 0; I != Count; ++I, Dst += Inner) {
      int64_t Index =
          I64 ? Indices.data<int64_t>()[I] : Indices.data<int32_t>()[I];
      if (Index < -Len || Index >= Len)
        return A.error("index " + Twine(Index) + " is out of range for " +
                       "dimension " + Twine(P->Axis) + " of size " +
                       Twine(Len));
      if (Index < 0)
        Index += Len;
      if (Inner)
        std::memcpy(Dst, X.data<char>() + (O * Len + Index) * Inner, Inner);
    }
  return Error::success();
}
