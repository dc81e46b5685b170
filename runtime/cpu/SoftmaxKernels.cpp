//===- SoftmaxKernels.cpp - Softmax, LogSoftmax and Hardmax ---------------===//
//
// Along one axis (opset 13 semantics, `axis` defaults to -1): the maximum
// is subtracted first and the exponentials summed in f64 in index order.
// Hardmax writes 1 at the first maximum of each row, 0 elsewhere.
//
//===----------------------------------------------------------------------===//

#include "runtime/OpShapes.h"
#include "runtime/cpu/Kernels.h"

#include "ir/Graph.h"

#include <algorithm>
#include <cmath>

using namespace autopar;
using namespace llvm;

Error autopar::runSoftmax(const KernelArgs &A) {
  const Tensor &X = A.In[0], &Y = A.Out[0];
  if (Error E = A.checkType(0, {ElementType::F32}))
    return E;
  if (Error E = A.checkResultType(0, {ElementType::F32}))
    return E;
  Expected<AxisExtents> P = planSoftmax(A);
  if (!P)
    return P.takeError();
  bool Log = A.N.getOp() == OpId::LogSoftmax;
  int64_t Len = P->Len, Inner = P->Inner, Outer = P->Outer;
  const float *XD = X.data<float>();
  float *YD = Y.data<float>();
  for (int64_t O = 0; O != Outer; ++O)
    for (int64_t I = 0; I != Inner; ++I) {
      int64_t Base = O * Len * Inner + I;
      float Max = -INFINITY;
      for (int64_t J = 0; J != Len; ++J)
        Max = std::max(Max, XD[Base + J * Inner]);
      double Sum = 0;
      for (int64_t J = 0; J != Len; ++J)
        Sum += std::exp(double(XD[Base + J * Inner]) - Max);
      double LogSum = std::log(Sum);
      for (int64_t J = 0; J != Len; ++J) {
        double Shifted = double(XD[Base + J * Inner]) - Max;
        YD[Base + J * Inner] =
            float(Log ? Shifted - LogSum : std::exp(Shifted) / Sum);
      }
    }
  return Error::success();
}

Error autopar::runHardmax(const KernelArgs &A) {
  const Tensor &X = A.In[0], &Y = A.Out[0];
  if (Error E = A.checkType(0, {ElementType::F32}))
    return E;
  if (Error E = A.checkResultType(0, {ElementType::F32}))
    return E;
  Expected<AxisExtents> P = planSoftmax(A);
  if (!P)
    return P.takeError();
  int64_t Len = P->Len, Inner = P->Inner, Outer = P->Outer;
  const float *XD = X.data<float>();
  float *YD = Y.data<float>();
  for (int64_t O = 0; O != Outer; ++O)
    for (int64_t I = 0; I != Inner; ++I) {
      int64_t Base = O * Len * Inner + I;
      // The first maximum; a NaN counts as one (numpy's argmax).
      int64_t Best = 0;
      for (int64_t J = 1; J < Len; ++J) {
        float V = XD[Base + J * Inner], B = XD[Base + Best * Inner];
        if (!std::isnan(B) && (V > B || std::isnan(V)))
          Best = J;
      }
      for (int64_t J = 0; J != Len; ++J)
        YD[Base + J * Inner] = J == Best ? 1.0f : 0.0f;
    }
  return Error::success();
}
