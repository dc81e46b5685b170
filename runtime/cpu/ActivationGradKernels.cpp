//===- ActivationGradKernels.cpp - Gradients of activations, softmax ------===//
//
// GeluGrad(dY, X) (erf and tanh forms) multiplies dY by the derivative in
// f32 (cpu/VectorMath.h); SiluGrad(dY, X) and SwiGLUGrad(dY, A, B) -> dA, dB
// multiply dY by the derivative, computed in f64 per element; SoftmaxGrad(dY,
// Y) along `axis` is Y * (dY - sum(dY * Y)), the sum in index order.
//
//===----------------------------------------------------------------------===//

#include "runtime/OpShapes.h"
#include "runtime/cpu/Kernels.h"
#include "runtime/cpu/VectorMath.h"

#include "ir/Graph.h"

#include <cmath>

using namespace autopar;
using namespace llvm;

static Error checkSameF32(const KernelArgs &A, unsigned Count) {
  for (unsigned I = 0; I != Count; ++I) {
    if (Error E = A.checkType(I, {ElementType::F32}))
      return E;
    if (A.In[I].getShape() != A.In[0].getShape())
      return A.error("operands " + A.In[0].getTypeString() + " and " +
                     A.In[I].getTypeString() + " differ");
  }
  for (unsigned I = 0; I != A.Out.size(); ++I)
    if (Error E = A.checkShape(I, A.In[0].getShape()))
      return E;
  return Error::success();
}

static double sigmoid(double X) { return 1 / (1 + std::exp(-X)); }

Error autopar::runGeluGrad(const KernelArgs &A) {
  if (Error E = checkSameF32(A, 2))
    return E;
  geluGradArray(A.In[0].data<float>(), A.In[1].data<float>(),
                A.Out[0].data<float>(), A.In[0].getNumElements(),
                A.stringAttr("approximate", "none") == "tanh");
  return Error::success();
}

Error autopar::runSiluGrad(const KernelArgs &A) {
  if (Error E = checkSameF32(A, 2))
    return E;
  const float *DY = A.In[0].data<float>(), *X = A.In[1].data<float>();
  float *DX = A.Out[0].data<float>();
  for (int64_t I = 0, N = A.In[0].getNumElements(); I != N; ++I) {
    double S = sigmoid(X[I]);
    DX[I] = float(DY[I] * S * (1 + X[I] * (1 - S)));
  }
  return Error::success();
}

Error autopar::runSwiGLUGrad(const KernelArgs &A) {
  if (Error E = checkSameF32(A, 3))
    return E;
  double Alpha = A.floatAttr("alpha", 1.0);
  const float *DY = A.In[0].data<float>(), *X = A.In[1].data<float>(),
              *G = A.In[2].data<float>();
  float *DA = A.Out[0].data<float>(), *DB = A.Out[1].data<float>();
  for (int64_t I = 0, N = A.In[0].getNumElements(); I != N; ++I) {
    double S = sigmoid(Alpha * X[I]);
    DA[I] = float(DY[I] * G[I] * (S + Alpha * X[I] * S * (1 - S)));
    DB[I] = float(DY[I] * X[I] * S);
  }
  return Error::success();
}

Error autopar::runSoftmaxGrad(const KernelArgs &A) {
  if (Error E = checkSameF32(A, 2))
    return E;
  const Tensor &Y = A.In[1];
  Expected<AxisExtents> P = planAxis(A, 1, -1);
  if (!P)
    return P.takeError();
  int64_t Outer = P->Outer, Len = P->Len, Inner = P->Inner;
  const float *DY = A.In[0].data<float>(), *YD = Y.data<float>();
  float *DX = A.Out[0].data<float>();
  for (int64_t O = 0; O != Outer; ++O)
    for (int64_t In = 0; In != Inner; ++In) {
      int64_t Base = O * Len * Inner + In;
      double Dot = 0;
      for (int64_t J = 0; J != Len; ++J)
        Dot += double(DY[Base + J * Inner]) * YD[Base + J * Inner];
      for (int64_t J = 0; J != Len; ++J) {
        int64_t At = Base + J * Inner;
        DX[At] = float(YD[At] * (DY[At] - Dot));
      }
    }
  return Error::success();
}

// GatherGrad(data, indices, dY) {axis}: zeros of data's shape, then each
// slice of dY added at the row its index names, in dY's order.
Error autopar::runGatherGrad(const KernelArgs &A) {
  if (Error E = A.checkType(0, {ElementType::F32}))
    return E;
  if (Error E = A.checkType(1, {ElementType::I64, ElementType::I32}))
    return E;
  if (Error E = A.checkType(2, {ElementType::F32}))
    return E;
  const Tensor &Data = A.In[0], &Idx = A.In[1], &DY = A.In[2];
  Expected<GatherPlan> P = planGatherGrad(A);
  if (!P)
    return P.takeError();
  int64_t Outer = P->Outer, Len = P->Len, Inner = P->Inner, Count = P->Count;
  float *Out = A.Out[0].data<float>();
  std::fill_n(Out, Data.getNumElements(), 0.0f);
  const float *Up = DY.data<float>();
  for (int64_t O = 0; O != Outer; ++O)
    for (int64_t K = 0; K != Count; ++K) {
      int64_t I = Idx.getElementType() == ElementType::I64
                      ? Idx.data<int64_t>()[K]
                      : Idx.data<int32_t>()[K];
      if (I < 0)
        I += Len;
      if (I < 0 || I >= Len)
        return A.error("index " + Twine(I) + " is outside [0, " + Twine(Len) +
                       ")");
      float *Row = Out + (O * Len + I) * Inner;
      const float *Src = Up + (O * Count + K) * Inner;
      for (int64_t J = 0; J != Inner; ++J)
        Row[J] += Src[J];
    }
  return Error::success();
}
