//===- LossKernels.cpp - CrossEntropyLoss, its gradient, NLL loss ---------===//
//
// Logits [..., C] as rows of C classes, labels [...] one per row (i64 or
// i32); a label equal to ignore_index (default -100) counts for nothing.
// Each counted row's loss is logsumexp(z) - z[label], with the row's
// maximum subtracted, exp in f32 (vectorized: cpu/VectorMath.h) and its sum
// and log in f64; "sum" adds them in row order, "mean" divides
// by the counted rows (0 when none are). The gradient is
// dloss * (softmax(z) - onehot(label)), divided by the count for "mean".
//
//===----------------------------------------------------------------------===//

#include "runtime/OpShapes.h"
#include "runtime/cpu/Kernels.h"
#include "runtime/cpu/VectorMath.h"

#include "ir/Graph.h"

#include <algorithm>
#include <cmath>
#include <optional>
#include <vector>

using namespace autopar;
using namespace llvm;

namespace {

struct LossRows {
  int64_t Rows = 0, Classes = 0, Ignore = -100;
  bool Mean = false;
  std::vector<int64_t> Labels;
  int64_t Counted = 0;
};

} // namespace

static Expected<LossRows> getLossRows(const KernelArgs &A, unsigned Logits,
                                      unsigned Labels) {
  if (Error E = A.checkType(Logits, {ElementType::F32}))
    return E;
  if (Error E = A.checkType(Labels, {ElementType::I64, ElementType::I32}))
    return E;
  const Tensor &Y = A.In[Labels];
  Expected<LossPlan> P = planLoss(A, Logits, Labels);
  if (!P)
    return P.takeError();
  LossRows R;
  R.Classes = P->Classes;
  R.Rows = P->Rows;
  R.Ignore = P->Ignore;
  R.Mean = P->Mean;
  for (int64_t I = 0; I != R.Rows; ++I) {
    int64_t L = Y.getElementType() == ElementType::I64 ? Y.data<int64_t>()[I]
                                                       : Y.data<int32_t>()[I];
    if (L != R.Ignore && (L < 0 || L >= R.Classes))
      return A.error("label " + Twine(L) + " at row " + Twine(I) +
                     " is outside [0, " + Twine(R.Classes) + ")");
    R.Counted += L != R.Ignore;
    R.Labels.push_back(L);
  }
  return R;
}

/// A row's maximum and the sum of exp(z - max), with exp(z - max) left in
/// Exp (C entries).
static std::pair<float, double> expSum(const float *Row, int64_t C,
                                       float *Exp) {
  float Max = maxOf(Row, C);
  return {Max, expShifted(Row, Max, Exp, C)};
}

Error autopar::runCrossEntropyLoss(const KernelArgs &A) {
  Expected<LossRows> R = getLossRows(A, 0, 1);
  if (!R)
    return R.takeError();
  if (Error E = A.checkShape(0, {}))
    return E;
  const float *Z = A.In[0].data<float>();
  std::vector<float> Exp(R->Classes);
  double Total = 0;
  for (int64_t I = 0; I != R->Rows; ++I) {
    if (R->Labels[I] == R->Ignore)
      continue;
    const float *Row = Z + I * R->Classes;
    auto [Max, Sum] = expSum(Row, R->Classes, Exp.data());
    Total += double(Max) + std::log(Sum) - Row[R->Labels[I]];
  }
  if (R->Mean)
    Total = R->Counted ? Total / R->Counted : 0;
  A.Out[0].data<float>()[0] = float(Total);
  return Error::success();
}

Error autopar::runCrossEntropyLossGrad(const KernelArgs &A) {
  Expected<LossRows> R = getLossRows(A, 1, 2);
  if (!R)
    return R.takeError();
  if (Error E = A.checkType(0, {ElementType::F32}))
    return E;
  if (Error E = A.checkShape(0, A.In[1].getShape()))
    return E;
  double Scale = A.In[0].data<float>()[0];
  if (R->Mean)
    Scale = R->Counted ? Scale / R->Counted : 0;
  const float *Z = A.In[1].data<float>();
  float *DZ = A.Out[0].data<float>();
  for (int64_t I = 0; I != R->Rows; ++I) {
    const float *Row = Z + I * R->Classes;
    float *Out = DZ + I * R->Classes;
    if (R->Labels[I] == R->Ignore) {
      std::fill_n(Out, R->Classes, 0.0f);
      continue;
    }
    // softmax(z) = exp(z - max) / sum, the exponentials written into Out
    // first.
    double Sum = expSum(Row, R->Classes, Out).second;
    float Step = float(Scale / Sum);
    // The label's entry in f64: p - 1 cancels when p is near 1.
    double Label = Scale * (Out[R->Labels[I]] / Sum - 1);
    for (int64_t J = 0; J != R->Classes; ++J)
      Out[J] *= Step;
    Out[R->Labels[I]] = float(Label);
  }
  return Error::success();
}

// NegativeLogLikelihoodLoss: input [N, C, d...] (f32), target [N, d...],
// weight [C]?. Each element's loss is -input[n, t, d...] * weight[t] (0
// where t is ignore_index, which has no default); "mean" divides the sum by
// the sum of the weights counted (0 when it is 0), in f64 in element order.
// The gradient puts -weight[t] times dloss (the element's, or the scalar
// divided as the mean divides) at each counted input[n, t, d...].

/// Visits each counted element of NegativeLogLikelihoodLoss(Grad), whose
/// input is operand First: Fn(I, Offset, Weight) with I the flat position in
/// target and Offset the input element it reads. Sets Weights to the sum of
/// the weights visited.
static Error
forEachNllElement(const KernelArgs &A, unsigned First, double &Weights,
                  function_ref<void(int64_t, int64_t, double)> Fn) {
  const Tensor &X = A.In[First], &Target = A.In[First + 1];
  if (Error E = A.checkType(First, {ElementType::F32}))
    return E;
  if (Error E = A.checkType(First + 1, {ElementType::I64, ElementType::I32}))
    return E;
  if (X.getRank() < 2 || Target.getRank() + 1 != X.getRank() ||
      Target.getDim(0) != X.getDim(0) ||
      Target.getShape().drop_front() != X.getShape().drop_front(2))
    return A.error("target " + Target.getTypeString() +
                   " must have the shape of input " + X.getTypeString() +
                   " without its classes (axis 1)");
  int64_t C = X.getDim(1), Inner = 1;
  for (unsigned D = 2; D != X.getRank(); ++D)
    Inner *= X.getDim(D);
  const float *W = nullptr;
  if (A.has(First + 2)) {
    if (Error E = A.checkType(First + 2, {ElementType::F32}))
      return E;
    if (A.In[First + 2].getShape() != ArrayRef<int64_t>{C})
      return A.error("weight " + A.In[First + 2].getTypeString() +
                     " must be [" + Twine(C) + "]");
    W = A.In[First + 2].data<float>();
  }
  std::optional<int64_t> Ignore;
  if (A.attr("ignore_index"))
    Ignore = A.intAttr("ignore_index", 0);
  Weights = 0;
  for (int64_t I = 0, E = Target.getNumElements(); I != E; ++I) {
    int64_t T = Target.getElementType() == ElementType::I64
                    ? Target.data<int64_t>()[I]
                    : Target.data<int32_t>()[I];
    if (T == Ignore)
      continue;
    if (T < 0 || T >= C)
      return A.error("target " + Twine(T) + " at element " + Twine(I) +
                     " is outside [0, " + Twine(C) + ")");
    double Weight = W ? W[T] : 1.0;
    int64_t N = I / Inner, D = I - N * Inner;
    Fn(I, (N * C + T) * Inner + D, Weight);
    Weights += Weight;
  }
  return Error::success();
}

Error autopar::runNllLoss(const KernelArgs &A) {
  StringRef Reduction = A.stringAttr("reduction", "mean");
  bool None = Reduction == "none";
  if (Error E =
          A.checkShape(0, None ? A.In[1].getShape() : ArrayRef<int64_t>()))
    return E;
  float *Out = A.Out[0].data<float>();
  if (None)
    std::fill_n(Out, A.Out[0].getNumElements(), 0.0f);
  const float *X = A.In[0].data<float>();
  double Total = 0, Weights = 0;
  if (Error E = forEachNllElement(
          A, 0, Weights, [&](int64_t I, int64_t Offset, double Weight) {
            double Loss = -double(X[Offset]) * Weight;
            if (None)
              Out[I] = float(Loss);
            Total += Loss;
          }))
    return E;
  if (!None)
    Out[0] = float(Reduction == "mean" ? (Weights != 0 ? Total / Weights : 0)
                                       : Total);
  return Error::success();
}

Error autopar::runNllLossGrad(const KernelArgs &A) {
  if (Error E = A.checkType(0, {ElementType::F32}))
    return E;
  if (Error E = A.checkShape(0, A.In[1].getShape()))
    return E;
  StringRef Reduction = A.stringAttr("reduction", "mean");
  bool None = Reduction == "none";
  if (A.In[0].getShape() != (None ? A.In[2].getShape() : ArrayRef<int64_t>()))
    return A.error("dloss " + A.In[0].getTypeString() +
                   " must have the loss's shape");
  const float *DLoss = A.In[0].data<float>();
  float *DX = A.Out[0].data<float>();
  std::fill_n(DX, A.Out[0].getNumElements(), 0.0f);
  double Scale = None ? 1.0 : DLoss[0];
  if (Reduction == "mean") {
    double Weights = 0;
    if (Error E =
            forEachNllElement(A, 1, Weights, [](int64_t, int64_t, double) {}))
      return E;
    Scale = Weights != 0 ? Scale / Weights : 0;
  }
  double Weights = 0;
  return forEachNllElement(
      A, 1, Weights, [&](int64_t I, int64_t Offset, double Weight) {
        DX[Offset] = float(-Weight * (None ? DLoss[I] : Scale));
      });
}
