//===- NormKernels.cpp - LayerNormalization and RMSNormalization ----------===//
//
// Both normalise over the dimensions from `axis` (default -1) on; Scale and
// B broadcast to that normalised shape. Statistics are computed in f64 in
// one pass per row (cpu/VectorMath.h's rowMoments: shifted sums in eight
// chains): LayerNormalization's mean and population variance, with the
// optional Mean and InvStdDev results of shape [X's leading dimensions, 1,
// ..., 1]; RMSNormalization's mean of squares. The normalized row is
// computed in f32 in a second pass.
//
//===----------------------------------------------------------------------===//

#include "runtime/OpShapes.h"
#include "runtime/cpu/Kernels.h"
#include "runtime/cpu/VectorMath.h"

#include "ir/Graph.h"

#include <cmath>
#include <vector>

using namespace autopar;
using namespace llvm;

namespace {

/// The rows of X normalised from Axis on, with Scale and B broadcast to a
/// row.
struct NormRows {
  int64_t Rows = 0, Len = 0;
  unsigned Axis = 0;
  std::vector<float> Scale, Bias;
};

} // namespace

/// T broadcast to the normalised shape Row, as one row.
static Expected<std::vector<float>> expandToRow(const KernelArgs &A, unsigned I,
                                                ArrayRef<int64_t> Row) {
  const Tensor &T = A.In[I];
  if (Error E = checkBroadcastsToRow(A, I, Row))
    return E;
  std::vector<float> Values(getNumElements(Row));
  StridedWalk Walk(Row, {getBroadcastStrides(T.getShape(), Row)});
  for (size_t J = 0; J != Values.size(); ++J, Walk.next())
    Values[J] = T.data<float>()[Walk.offset(0)];
  return Values;
}

static Expected<NormRows> getRows(const KernelArgs &A, unsigned ScaleOperand,
                                  int BiasOperand) {
  for (unsigned I = 0; I != A.In.size(); ++I)
    if (A.has(I))
      if (Error E = A.checkType(I, {ElementType::F32}))
        return E;
  Expected<NormPlan> P = planNorm(A);
  if (!P)
    return P.takeError();
  if (Error E = A.checkResultType(0, {ElementType::F32}))
    return E;
  NormRows R;
  R.Axis = P->Axis;
  ArrayRef<int64_t> Row = P->Row;
  R.Len = P->Len;
  R.Rows = P->Rows;
  Expected<std::vector<float>> Scale = expandToRow(A, ScaleOperand, Row);
  if (!Scale)
    return Scale.takeError();
  R.Scale = std::move(*Scale);
  if (BiasOperand >= 0 && A.has(BiasOperand)) {
    Expected<std::vector<float>> Bias = expandToRow(A, BiasOperand, Row);
    if (!Bias)
      return Bias.takeError();
    R.Bias = std::move(*Bias);
  }
  return R;
}

Error autopar::runLayerNorm(const KernelArgs &A) {
  Expected<NormRows> R = getRows(A, 1, 2);
  if (!R)
    return R.takeError();
  const Tensor &X = A.In[0];
  Shape StatShape = getNormStatShape(X.getShape(), R->Axis);
  for (unsigned I : {1u, 2u})
    if (A.hasResult(I)) {
      if (Error E = A.checkShape(I, StatShape))
        return E;
      if (Error E = A.checkResultType(I, {ElementType::F32}))
        return E;
    }
  double Epsilon = A.floatAttr("epsilon", 1e-5);
  const float *XD = X.data<float>();
  float *YD = A.Out[0].data<float>();
  float *MeanOut = A.hasResult(1) ? A.Out[1].data<float>() : nullptr;
  float *InvOut = A.hasResult(2) ? A.Out[2].data<float>() : nullptr;
  // Rows are independent: threads take whole ones.
  const float *Bias = R->Bias.empty() ? nullptr : R->Bias.data();
  parallelFor(R->Rows, [&](int64_t Row) {
    const float *In = XD + Row * R->Len;
    RowMoments M = rowMoments(In, R->Len, /*Centered=*/true);
    double InvStdDev = 1 / std::sqrt(M.Variance + Epsilon);
    normalizeRow(In, R->Scale.data(), Bias, float(M.Mean), float(InvStdDev),
                 YD + Row * R->Len, R->Len);
    if (MeanOut)
      MeanOut[Row] = float(M.Mean);
    if (InvOut)
      InvOut[Row] = float(InvStdDev);
  });
  return Error::success();
}

Error autopar::runRMSNorm(const KernelArgs &A) {
  Expected<NormRows> R = getRows(A, 1, -1);
  if (!R)
    return R.takeError();
  double Epsilon = A.floatAttr("epsilon", 1e-5);
  const float *XD = A.In[0].data<float>();
  float *YD = A.Out[0].data<float>();
  parallelFor(R->Rows, [&](int64_t Row) {
    const float *In = XD + Row * R->Len;
    RowMoments M = rowMoments(In, R->Len, /*Centered=*/false);
    double Inv = 1 / std::sqrt(M.Variance + Epsilon);
    normalizeRow(In, R->Scale.data(), nullptr, 0.0f, float(Inv),
                 YD + Row * R->Len, R->Len);
  });
  return Error::success();
}
