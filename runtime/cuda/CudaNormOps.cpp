//===- CudaNormOps.cpp - Softmax and normalisations on the device ---------===//
//
// Softmax, LogSoftmax and SoftmaxGrad along one axis; LayerNormalization and
// RMSNormalization (scale and bias broadcast to the normalised row in
// scratch when they are smaller) and their gradients, with statistics in
// f32 or the program's type.
//
//===----------------------------------------------------------------------===//

#include "runtime/cuda/CudaOpSupport.h"

#include "ir/Graph.h"
#include "runtime/OpShapes.h"

#include <algorithm>

using namespace autopar;
using namespace autopar::cuda;
using namespace llvm;

Error cuda::runSoftmax(const KernelArgs &A, CudaContext &C) {
  const Tensor &X = A.In[0], &Y = A.Out[0];
  if (Error E = checkAllFloat(A))
    return E;
  Expected<AxisExtents> P = planSoftmax(A);
  if (!P)
    return P.takeError();
  return launched(A, softmax(dt(X), X.getData(), dt(Y), Y.getData(), P->Outer,
                             P->Len, P->Inner, A.N.getOp() == OpId::LogSoftmax,
                             C.getStream()));
}

Error cuda::runSoftmaxGrad(const KernelArgs &A, CudaContext &C) {
  if (Error E = checkSameFloat(A, 2))
    return E;
  const Tensor &Y = A.In[1];
  Expected<AxisExtents> P = planAxis(A, 1, -1);
  if (!P)
    return P.takeError();
  return launched(A, softmaxGrad(dt(Y), A.In[0].getData(), Y.getData(),
                                 A.Out[0].getData(), P->Outer, P->Len, P->Inner,
                                 C.getStream()));
}

/// Operand I as Len contiguous elements of the normalised row Row: itself
/// when it has that many, else broadcast into scratch.
static Expected<Tensor> rowOperand(const KernelArgs &A, CudaContext &C,
                                   Scratch &S, unsigned I,
                                   ArrayRef<int64_t> Row) {
  const Tensor &T = A.In[I];
  if (Error E = checkBroadcastsToRow(A, I, Row))
    return E;
  if (T.getNumElements() == getNumElements(Row))
    return T;
  Expected<Tensor> R = S.get(A, T.getElementType(), Row);
  if (!R)
    return R.takeError();
  Expected<Dims> D = makeDims(A, Row);
  if (!D)
    return D.takeError();
  if (Error E = launched(
          A,
          copyStrided(R->getData(), 0, makeStrides(getStrides(Row)),
                      T.getData(), 0, broadcastTo(T.getShape(), Row), *D,
                      int(getElementSize(T.getElementType())), C.getStream())))
    return E;
  return *R;
}

Error cuda::runNorm(const KernelArgs &A, CudaContext &C) {
  bool Centered = A.N.getOp() == OpId::LayerNormalization;
  if (Error E = checkAllFloat(A))
    return E;
  const Tensor &X = A.In[0];
  Expected<NormPlan> P = planNorm(A);
  if (!P)
    return P.takeError();
  ArrayRef<int64_t> Row = P->Row;
  Scratch S(C);
  Expected<Tensor> Scale = rowOperand(A, C, S, 1, Row);
  if (!Scale)
    return Scale.takeError();
  Tensor Bias;
  if (Centered && A.has(2)) {
    Expected<Tensor> B = rowOperand(A, C, S, 2, Row);
    if (!B)
      return B.takeError();
    if (B->getElementType() != Scale->getElementType())
      return A.error("scale " + Scale->getTypeString() + " and bias " +
                     B->getTypeString() + " differ in type");
    Bias = *B;
  }
  DType StatT = DType::F32;
  if (Centered) {
    Shape StatShape = getNormStatShape(X.getShape(), P->Axis);
    for (unsigned I : {1u, 2u})
      if (A.hasResult(I)) {
        if (Error E = A.checkShape(I, StatShape))
          return E;
        StatT = dt(A.Out[I]);
      }
    if (A.hasResult(1) && A.hasResult(2) &&
        A.Out[1].getElementType() != A.Out[2].getElementType())
      return A.error("Mean and InvStdDev differ in type");
  }
  return launched(
      A, norm(Centered, dt(X), X.getData(), dt(*Scale), Scale->getData(),
              Bias.isPresent() ? Bias.getData() : nullptr, dt(A.Out[0]),
              A.Out[0].getData(), StatT,
              Centered && A.hasResult(1) ? A.Out[1].getData() : nullptr,
              Centered && A.hasResult(2) ? A.Out[2].getData() : nullptr,
              P->Rows, P->Len, A.floatAttr("epsilon", 1e-5), C.getStream()));
}

Error cuda::runNormGrad(const KernelArgs &A, CudaContext &C) {
  bool Centered = A.N.getOp() == OpId::LayerNormalizationGrad;
  if (Error E = checkAllFloat(A))
    return E;
  const Tensor &DY = A.In[0], &X = A.In[1], &Scale = A.In[2];
  Expected<NormPlan> P = planNormGrad(A);
  if (!P)
    return P.takeError();
  int64_t Len = P->Len, Rows = P->Rows;
  if (A.Out[0].getElementType() != X.getElementType())
    return A.error("dX " + A.Out[0].getTypeString() + " must have X's type");
  for (unsigned I = 1; I < A.Out.size(); ++I)
    if (A.hasResult(I)) {
      if (Error E = A.checkShape(I, Scale.getShape()))
        return E;
      if (A.Out[I].getElementType() != Scale.getElementType())
        return A.error("result " + Twine(I) + " " + A.Out[I].getTypeString() +
                       " must have the scale's type");
    }
  Scratch S(C);
  Expected<Tensor> Work =
      S.get(A, ElementType::F64,
            {std::max<int64_t>(normGradWorkDoubles(Rows, Len), 1)});
  if (!Work)
    return Work.takeError();
  return launched(
      A, normGrad(Centered, dt(X), DY.getData(), X.getData(), dt(Scale),
                  Scale.getData(), A.Out[0].getData(),
                  A.hasResult(1) ? A.Out[1].getData() : nullptr,
                  Centered && A.hasResult(2) ? A.Out[2].getData() : nullptr,
                  Rows, Len, A.floatAttr("epsilon", 1e-5), Work->data<double>(),
                  C.getStream()));
}
