//===- CudaLayoutOps.cpp - Layouts, slices and gathers on the device ------===//
//
// Element-type agnostic copies: reshapes copy the bytes after checking the
// element count (the result shape is the program's); Transpose, Expand, Concat,
// Split and Slice as strided copies; Gather and GatherGrad with indices checked
// on the device (their vocabulary-parallel form is CudaShardedOps.cpp's).
// Expand and Split take their shapes from the results, so they read nothing
// back from the device.
//
//===----------------------------------------------------------------------===//

#include "runtime/cuda/CudaOpSupport.h"

#include "ir/Graph.h"
#include "runtime/OpShapes.h"

#include <cstring>

using namespace autopar;
using namespace autopar::cuda;
using namespace llvm;

Error cuda::runReshapeLike(const KernelArgs &A, CudaContext &C) {
  const Tensor &X = A.In[0], &Y = A.Out[0];
  if (Y.getNumElements() != X.getNumElements())
    return A.error("cannot reshape " + X.getTypeString() + " to " +
                   Y.getTypeString());
  if (Y.getElementType() != X.getElementType())
    return A.error("the result " + Y.getTypeString() +
                   " must have the type of " + X.getTypeString());
  return copyDevice(A, C, Y, X);
}

Error cuda::runTranspose(const KernelArgs &A, CudaContext &C) {
  const Tensor &X = A.In[0], &Y = A.Out[0];
  Expected<StridedView> V = planTranspose(A);
  if (!V)
    return V.takeError();
  const Shape &Out = V->Out;
  Expected<Dims> D = makeDims(A, Out);
  if (!D)
    return D.takeError();
  return launched(A, copyStrided(Y.getData(), 0, makeStrides(getStrides(Out)),
                                 X.getData(), 0, makeStrides(V->Strides), *D,
                                 int(getElementSize(X.getElementType())),
                                 C.getStream()));
}

Error cuda::runExpand(const KernelArgs &A, CudaContext &C) {
  const Tensor &X = A.In[0], &Y = A.Out[0];
  ArrayRef<int64_t> Out = Y.getShape();
  std::optional<Shape> Joint = broadcastShapes({X.getShape(), Out});
  if (!Joint || ArrayRef<int64_t>(*Joint) != Out)
    return A.error(X.getTypeString() + " does not broadcast to " +
                   Y.getTypeString());
  if (Y.getElementType() != X.getElementType())
    return A.error("the result " + Y.getTypeString() +
                   " must have the type of " + X.getTypeString());
  Expected<Dims> D = makeDims(A, Out);
  if (!D)
    return D.takeError();
  return launched(A, copyStrided(Y.getData(), 0, makeStrides(getStrides(Out)),
                                 X.getData(), 0, broadcastTo(X.getShape(), Out),
                                 *D, int(getElementSize(X.getElementType())),
                                 C.getStream()));
}

Error cuda::runConcat(const KernelArgs &A, CudaContext &C) {
  const Tensor &Y = A.Out[0];
  Expected<ConcatPlan> P = planConcat(A);
  if (!P)
    return P.takeError();
  const Shape &Out = P->Out;
  unsigned Axis = P->Axis;
  Strides OutStrides = makeStrides(getStrides(Out));
  int64_t At = 0;
  for (const Tensor &X : A.In) {
    Expected<Dims> D = makeDims(A, X.getShape());
    if (!D)
      return D.takeError();
    if (Error E = launched(
            A, copyStrided(
                   Y.getData(), At * OutStrides.S[Axis], OutStrides,
                   X.getData(), 0, makeStrides(getStrides(X.getShape())), *D,
                   int(getElementSize(X.getElementType())), C.getStream())))
      return E;
    At += X.getDim(Axis);
  }
  return Error::success();
}

Error cuda::runSplit(const KernelArgs &A, CudaContext &C) {
  const Tensor &X = A.In[0];
  Expected<unsigned> Axis = A.normalizeAxis(A.intAttr("axis", 0), X.getRank());
  if (!Axis)
    return Axis.takeError();
  // The sizes are the results' (the program's types); they must tile the
  // dimension.
  int64_t Sum = 0;
  for (unsigned I = 0; I != A.Out.size(); ++I) {
    Shape Want = toShape(X.getShape());
    Want[*Axis] =
        A.Out[I].getRank() == X.getRank() ? A.Out[I].getDim(*Axis) : -1;
    if (Error E = A.checkShape(I, Want))
      return E;
    if (A.Out[I].getElementType() != X.getElementType())
      return A.error("result " + Twine(I) + " must have the type of " +
                     X.getTypeString());
    Sum += Want[*Axis];
  }
  if (Sum != X.getDim(*Axis))
    return A.error("the results' sizes along axis " + Twine(*Axis) +
                   " sum to " + Twine(Sum) + ", not " + Twine(X.getDim(*Axis)));
  Strides InStrides = makeStrides(getStrides(X.getShape()));
  int64_t At = 0;
  for (const Tensor &Y : A.Out) {
    Expected<Dims> D = makeDims(A, Y.getShape());
    if (!D)
      return D.takeError();
    if (Error E = launched(
            A, copyStrided(
                   Y.getData(), 0, makeStrides(getStrides(Y.getShape())),
                   X.getData(), At * InStrides.S[*Axis], InStrides, *D,
                   int(getElementSize(X.getElementType())), C.getStream())))
      return E;
    At += Y.getDim(*Axis);
  }
  return Error::success();
}

Error cuda::runSlice(const KernelArgs &A, CudaContext &C) {
  const Tensor &X = A.In[0], &Y = A.Out[0];
  Expected<StridedView> V =
      planSlice(A, [&](unsigned I) { return readIntOperand(A, C, I); });
  if (!V)
    return V.takeError();
  const Shape &Out = V->Out;
  if (Y.getElementType() != X.getElementType())
    return A.error("the result must have the type of " + X.getTypeString());
  Expected<Dims> D = makeDims(A, Out);
  if (!D)
    return D.takeError();
  return launched(A, copyStrided(Y.getData(), 0, makeStrides(getStrides(Out)),
                                 X.getData(), V->Base, makeStrides(V->Strides),
                                 *D, int(getElementSize(X.getElementType())),
                                 C.getStream()));
}

Error cuda::runGather(const KernelArgs &A, CudaContext &C) {
  const Tensor &X = A.In[0], &Indices = A.In[1], &Y = A.Out[0];
  if (Error E = checkIndexType(A, 1))
    return E;
  Expected<GatherPlan> P = planGather(A);
  if (!P)
    return P.takeError();
  if (Y.getElementType() != X.getElementType())
    return A.error("the result must have the type of " + X.getTypeString());
  int64_t Len = P->Len;
  int Code = C.getErrorCode(A.N, "an index is out of range for dimension " +
                                     Twine(P->Axis) + " of size " + Twine(Len));
  return launched(A,
                  gather(X.getData(), Indices.getData(),
                         Indices.getElementType() == ElementType::I64,
                         Y.getData(), P->Outer, Len, P->Count,
                         P->Inner * int64_t(getElementSize(X.getElementType())),
                         C.getErrorWord(), Code, C.getStream()));
}

Error cuda::runGatherGrad(const KernelArgs &A, CudaContext &C) {
  const Tensor &Idx = A.In[1], &DY = A.In[2], &Out = A.Out[0];
  if (Error E = checkIndexType(A, 1))
    return E;
  for (unsigned I : {0u, 2u})
    if (Error E = checkFloat(A, I))
      return E;
  if (Error E = checkFloatResult(A, 0))
    return E;
  Expected<GatherPlan> P = planGatherGrad(A);
  if (!P)
    return P.takeError();
  int64_t Outer = P->Outer, Len = P->Len, Inner = P->Inner, Count = P->Count;
  Scratch S(C);
  Expected<Tensor> SumsOr = getF32Sums(A, S, Out);
  if (!SumsOr)
    return SumsOr.takeError();
  const Tensor &Sums = *SumsOr;
  int Code = C.getErrorCode(A.N, "an index is outside [0, " + Twine(Len) + ")");
  if (Error E = launched(
          A, gatherGrad(Idx.getData(), Idx.getElementType() == ElementType::I64,
                        dt(DY), DY.getData(), Sums.data<float>(), Outer, Len,
                        Count, Inner, C.getErrorWord(), Code, C.getStream())))
    return E;
  return castFromF32(A, C, Sums, Out);
}
