//===- ChannelNormKernels.cpp - BatchNormalization (inference) and LRN ----===//
//
// Both take X [N, C, D1, ..., Dn] in f32 (rank 2 or more; BatchNormalization
// also takes X [N], one channel) and work per channel.
//
// BatchNormalization in its inference form (training_mode 0): Y = (X -
// input_mean) / sqrt(input_var + epsilon) * scale + B, with scale, B,
// input_mean and input_var of shape [C]; the per-channel factors are
// computed in f64. The training form (batch statistics, running_mean and
// running_var results) is rejected.
//
// LRN: Y = X / (bias + alpha / size * square_sum) ^ beta, square_sum being
// the f64 sum, in channel order, of X^2 over the channels [c - floor((size
// - 1) / 2), c + ceil((size - 1) / 2)] that exist, at the same batch and
// spatial index. Planes (n, c) are split over the kernel threads.
//
//===----------------------------------------------------------------------===//

#include "runtime/cpu/Kernels.h"
#include "runtime/cpu/WindowSupport.h"

#include "ir/Graph.h"

#include <algorithm>
#include <cmath>
#include <vector>

using namespace autopar;
using namespace llvm;

/// Checks that X (operand 0) has rank MinRank or more and that result 0 has
/// its shape.
static Error checkChannelInput(const KernelArgs &A, unsigned MinRank) {
  if (Error E = checkF32Operands(A))
    return E;
  const Tensor &X = A.In[0];
  if (X.getRank() < MinRank)
    return A.error("operand 0 " + X.getTypeString() + " must have rank " +
                   Twine(MinRank) + " or more");
  return A.checkShape(0, X.getShape());
}

Error autopar::runBatchNorm(const KernelArgs &A) {
  if (A.intAttr("training_mode", 0) != 0)
    return A.error("training_mode 1 (batch statistics) is not supported; the "
                   "CPU kernel computes the inference form");
  if (A.hasResult(1) || A.hasResult(2))
    return A.error("running_mean and running_var are results of the training "
                   "form, which the CPU kernel does not compute");
  if (Error E = checkChannelInput(A, 1))
    return E;
  const Tensor &X = A.In[0];
  // X [N] has one channel.
  int64_t C = X.getRank() > 1 ? X.getShape()[1] : 1;
  for (unsigned I = 1; I != 5; ++I)
    if (!A.has(I) || A.In[I].getShape() != ArrayRef<int64_t>(C))
      return A.error("operand " + Twine(I) + " must be given with shape [" +
                     Twine(C) + "]");
  double Epsilon = A.floatAttr("epsilon", 1e-5);
  const float *Scale = A.In[1].data<float>(), *Bias = A.In[2].data<float>();
  const float *Mean = A.In[3].data<float>(), *Var = A.In[4].data<float>();
  std::vector<double> Factor(C), Shift(C);
  for (int64_t J = 0; J != C; ++J) {
    Factor[J] = Scale[J] / std::sqrt(double(Var[J]) + Epsilon);
    Shift[J] = Bias[J] - Mean[J] * Factor[J];
  }
  int64_t PlaneSize =
      X.getRank() > 2 ? getNumElements(X.getShape().drop_front(2)) : 1;
  const float *XD = X.data<float>();
  float *YD = A.Out[0].data<float>();
  parallelFor(X.getShape()[0] * C, [&](int64_t Plane) {
    double F = Factor[Plane % C], S = Shift[Plane % C];
    const float *In = XD + Plane * PlaneSize;
    float *Out = YD + Plane * PlaneSize;
    for (int64_t J = 0; J != PlaneSize; ++J)
      Out[J] = float(In[J] * F + S);
  });
  return Error::success();
}

Error autopar::runLRN(const KernelArgs &A) {
  if (Error E = checkChannelInput(A, 2))
    return E;
  int64_t Size = A.intAttr("size", 0);
  if (Size < 1)
    return A.error("'size' must be positive, got " + Twine(Size));
  double Alpha = A.floatAttr("alpha", 1e-4), Beta = A.floatAttr("beta", 0.75),
         Bias = A.floatAttr("bias", 1.0);
  const Tensor &X = A.In[0];
  int64_t C = X.getShape()[1];
  int64_t PlaneSize = getNumElements(X.getShape().drop_front(2));
  int64_t Before = (Size - 1) / 2, After = Size - 1 - Before;
  const float *XD = X.data<float>();
  float *YD = A.Out[0].data<float>();
  parallelFor(X.getShape()[0] * C, [&](int64_t Plane) {
    int64_t Channel = Plane % C, Image = Plane / C;
    std::vector<double> SquareSum(PlaneSize, 0.0);
    for (int64_t K = std::max<int64_t>(0, Channel - Before),
                 E = std::min(C - 1, Channel + After);
         K <= E; ++K) {
      const float *In = XD + (Image * C + K) * PlaneSize;
      for (int64_t J = 0; J != PlaneSize; ++J)
        SquareSum[J] += double(In[J]) * In[J];
    }
    const float *In = XD + Plane * PlaneSize;
    float *Out = YD + Plane * PlaneSize;
    for (int64_t J = 0; J != PlaneSize; ++J)
      Out[J] = float(
          In[J] / std::pow(Bias + Alpha / double(Size) * SquareSum[J], Beta));
  });
  return Error::success();
}
