//===- LayoutKernels.cpp - Reshapes, Transpose, Expand
//---------------------===//
//
// Element-type agnostic. Reshape (0 copies a dimension unless allowzero,
// -1 is inferred), Flatten, Squeeze, Unsqueeze and Identity copy the bytes
// after checking the result shape the op gives.
//
//===----------------------------------------------------------------------===//

#include "runtime/OpShapes.h"
#include "runtime/cpu/Kernels.h"

#include "ir/Graph.h"

#include <algorithm>
#include <cstring>

using namespace autopar;
using namespace llvm;

static Expected<Shape> getReshapeShape(const KernelArgs &A) {
  ArrayRef<int64_t> In = A.In[0].getShape();
  Expected<Shape> Target = A.readInts(1);
  if (!Target)
    return Target.takeError();
  bool AllowZero = A.intAttr("allowzero", 0);
  int Infer = -1;
  int64_t Known = 1;
  for (size_t I = 0; I != Target->size(); ++I) {
    int64_t &D = (*Target)[I];
    if (D == 0 && !AllowZero) {
      if (I >= In.size())
        return A.error("shape entry " + Twine(I) +
                       " is 0 but the data has "
                       "rank " +
                       Twine(In.size()));
      D = In[I];
    }
    if (D == -1) {
      if (Infer >= 0)
        return A.error("the shape has more than one -1");
      Infer = int(I);
      continue;
    }
    if (D < 0)
      return A.error("shape entry " + Twine(I) + " is " + Twine(D));
    Known *= D;
  }
  int64_t Total = getNumElements(In);
  if (Infer >= 0) {
    if (Known == 0 || Total % Known)
      return A.error("cannot infer the -1 of the shape for " +
                     A.In[0].getTypeString());
    (*Target)[Infer] = Total / Known;
  }
  return Target;
}

static Expected<Shape> getSqueezeShape(const KernelArgs &A, bool Squeeze) {
  ArrayRef<int64_t> In = A.In[0].getShape();
  Expected<std::optional<Shape>> Axes = A.intsFromAttrOrOperand("axes", 1);
  if (!Axes)
    return Axes.takeError();
  unsigned Rank =
      Squeeze ? In.size() : In.size() + (*Axes ? (*Axes)->size() : 0);
  SmallVector<bool, 4> Marked(Rank, false);
  if (*Axes) {
    for (int64_t Axis : **Axes) {
      Expected<unsigned> D = A.normalizeAxis(Axis, Rank);
      if (!D)
        return D.takeError();
      if (Marked[*D])
        return A.error("axis " + Twine(Axis) + " is repeated");
      Marked[*D] = true;
    }
  } else if (Squeeze) {
    for (unsigned D = 0; D != Rank; ++D)
      Marked[D] = In[D] == 1;
  } else {
    return A.error("Unsqueeze needs axes");
  }
  Shape Out;
  if (Squeeze) {
    for (unsigned D = 0; D != Rank; ++D) {
      if (Marked[D] && In[D] != 1)
        return A.error("cannot squeeze dimension " + Twine(D) + " of size " +
                       Twine(In[D]));
      if (!Marked[D])
        Out.push_back(In[D]);
    }
    return Out;
  }
  const int64_t *Next = In.begin();
  for (unsigned D = 0; D != Rank; ++D)
    Out.push_back(Marked[D] ? 1 : *Next++);
  return Out;
}

Error autopar::runReshapeLike(const KernelArgs &A) {
  const Tensor &X = A.In[0], &Y = A.Out[0];
  ArrayRef<int64_t> In = X.getShape();
  Shape Out;
  // The family's ops (ir/OpFacts.def): Identity keeps the shape.
  OpId Op = A.N.getOp();
  if (Op == OpId::Reshape) {
    Expected<Shape> S = getReshapeShape(A);
    if (!S)
      return S.takeError();
    Out = std::move(*S);
  } else if (Op == OpId::Flatten) {
    int64_t Axis = A.intAttr("axis", 1);
    if (Axis < -int64_t(In.size()) || Axis > int64_t(In.size()))
      return A.error("axis " + Twine(Axis) + " is out of range");
    if (Axis < 0)
      Axis += In.size();
    Out = {getNumElements(In.take_front(Axis)),
           getNumElements(In.drop_front(Axis))};
  } else if (Op == OpId::Squeeze || Op == OpId::Unsqueeze) {
    Expected<Shape> S = getSqueezeShape(A, Op == OpId::Squeeze);
    if (!S)
      return S.takeError();
    Out = std::move(*S);
  } else {
    Out.assign(In.begin(), In.end());
  }
  if (Error E = A.checkShape(0, Out))
    return E;
  if (getNumElements(Out) != X.getNumElements())
    return A.error("cannot reshape " + X.getTypeString() + " to " +
                   Y.getTypeString());
  if (Error E = A.checkResultType(0, {X.getElementType()}))
    return E;
  if (X.getSizeInBytes())
    std::memcpy(Y.getData(), X.getData(), X.getSizeInBytes());
  return Error::success();
}

Error autopar::runTranspose(const KernelArgs &A) {
  const Tensor &X = A.In[0], &Y = A.Out[0];
  Expected<StridedView> V = planTranspose(A);
  if (!V)
    return V.takeError();
  if (Error E = A.checkResultType(0, {X.getElementType()}))
    return E;
  copyStridedOnThreads(Y.data<char>(), X.data<char>(),
                       getElementSize(X.getElementType()), V->Out, V->Strides);
  return Error::success();
}

Error autopar::runExpand(const KernelArgs &A) {
  const Tensor &X = A.In[0], &Y = A.Out[0];
  Expected<Shape> Target = A.readInts(1);
  if (!Target)
    return Target.takeError();
  std::optional<Shape> Out = broadcastShapes({X.getShape(), *Target});
  if (!Out)
    return A.error(X.getTypeString() + " does not broadcast with the shape");
  if (Error E = A.checkShape(0, *Out))
    return E;
  if (Error E = A.checkResultType(0, {X.getElementType()}))
    return E;
  copyStridedOnThreads(Y.data<char>(), X.data<char>(),
                       getElementSize(X.getElementType()), *Out,
                       getBroadcastStrides(X.getShape(), *Out));
  return Error::success();
}
