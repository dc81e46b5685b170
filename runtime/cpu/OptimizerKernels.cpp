//===- OptimizerKernels.cpp - AdamW and SGD steps -------------------------===//
//
// One parameter per node, elementwise, so a result may share its buffer
// with the operand it replaces (the executor computes optimizer steps in
// place). The executor hands consecutive AdamW nodes that share their
// hyper-parameters to the backend together (Backend::runNodes): one loop
// over all their elements, split over the threads in fixed chunks that may
// span parameters (runAdamWGroup). AdamW follows torch.optim.AdamW, in f32 and
// in its order of operations (cpu/VectorMath.h, vectorized):
//   p *= 1 - lr wd; m = b1 m + (1 - b1) g; v = b2 v + (1 - b2) g^2;
//   p -= lr / (1 - b1^t) * m / (sqrt(v) / sqrt(1 - b2^t) + eps).
// Sgd, in f64 per element: p -= lr * (g + wd * p).
// A `skip` operand other than 0 (loss scaling's found_inf: NaN when a
// gradient is not finite) skips the step: every result is the operand it
// replaces (nothing to do in place, a copy otherwise).
//
//===----------------------------------------------------------------------===//

#include "runtime/cpu/Kernels.h"
#include "runtime/cpu/VectorMath.h"

#include "ir/Graph.h"

#include <cmath>
#include <cstring>
#include <optional>
#include <vector>

using namespace autopar;
using namespace llvm;

static Error checkParamLike(const KernelArgs &A,
                            std::initializer_list<unsigned> Operands) {
  for (unsigned I : Operands) {
    if (Error E = A.checkType(I, {ElementType::F32}))
      return E;
    if (A.In[I].getShape() != A.In[0].getShape())
      return A.error("operand " + Twine(I) + " " + A.In[I].getTypeString() +
                     " does not match the parameter " +
                     A.In[0].getTypeString());
  }
  for (unsigned I = 0; I != A.Out.size(); ++I)
    if (Error E = A.checkShape(I, A.In[0].getShape()))
      return E;
  return Error::success();
}

static double scalarOperand(const KernelArgs &A, unsigned I) {
  return A.In[I].data<float>()[0];
}

/// Whether the node's optional `skip` operand I says to skip the step: any
/// value but 0, NaN included.
static Expected<bool> isSkipped(const KernelArgs &A, unsigned I) {
  if (!A.has(I))
    return false;
  if (Error E = A.checkType(I, {ElementType::F32}))
    return E;
  if (A.In[I].getNumElements() != 1)
    return A.error("operand " + Twine(I) + " (skip) must be one f32");
  return !(A.In[I].data<float>()[0] == 0.0f);
}

/// A skipped step: each result is the operand it replaces.
static void keepOperands(const KernelArgs &A) {
  for (unsigned R = 0; R != A.Out.size(); ++R) {
    const Tensor &From = A.In[R == 0 ? 0 : R + 1];
    if (A.Out[R].getData() != From.getData())
      std::memcpy(A.Out[R].getData(), From.getData(), From.getSizeInBytes());
  }
}

/// The checks of an AdamW node and its scalars as torch computes them.
static Expected<AdamWScalars> getAdamWScalars(const KernelArgs &A) {
  if (Error E = checkParamLike(A, {0, 1, 2, 3}))
    return E;
  double Lr = scalarOperand(A, 4), B1 = scalarOperand(A, 5),
         B2 = scalarOperand(A, 6), Eps = scalarOperand(A, 7),
         Wd = scalarOperand(A, 8), Step = scalarOperand(A, 9);
  if (Step < 1)
    return A.error("step must be 1 or more, got " + Twine(int64_t(Step)));
  // The scalars as torch computes them (Python floats, f64), then f32.
  AdamWScalars Scalars;
  Scalars.Decay = float(1 - Lr * Wd);
  Scalars.Beta1 = float(B1);
  Scalars.OneMinusBeta1 = float(1 - B1);
  Scalars.Beta2 = float(B2);
  Scalars.OneMinusBeta2 = float(1 - B2);
  Scalars.StepSize = float(Lr / (1 - std::pow(B1, Step)));
  Scalars.Correction2Sqrt = float(std::sqrt(1 - std::pow(B2, Step)));
  Scalars.Eps = float(Eps);
  return Scalars;
}

static AdamWTensor getAdamWTensor(const KernelArgs &A) {
  return {A.In[0].data<float>(),  A.In[1].data<float>(),
          A.In[2].data<float>(),  A.In[3].data<float>(),
          A.Out[0].data<float>(), A.Out[1].data<float>(),
          A.Out[2].data<float>(), A.In[0].getNumElements()};
}

Error autopar::runAdamWGroup(ArrayRef<KernelArgs> Nodes) {
  std::vector<AdamWTensor> Tensors;
  std::optional<AdamWScalars> First;
  std::optional<bool> Skipped;
  for (const KernelArgs &A : Nodes) {
    Expected<AdamWScalars> Scalars = getAdamWScalars(A);
    if (!Scalars)
      return Scalars.takeError();
    Expected<bool> Skip = isSkipped(A, 10);
    if (!Skip)
      return Skip.takeError();
    if ((First && std::memcmp(&*First, &*Scalars, sizeof(AdamWScalars))) ||
        (Skipped && *Skipped != *Skip))
      return A.error("a multi-tensor AdamW step with hyper-parameters that "
                     "differ from its group's");
    First = *Scalars;
    Skipped = *Skip;
    Tensors.push_back(getAdamWTensor(A));
  }
  if (Skipped && *Skipped) {
    for (const KernelArgs &A : Nodes)
      keepOperands(A);
    return Error::success();
  }
  if (First)
    adamWTensors(Tensors, *First);
  return Error::success();
}

/// One node is a group of one.
Error autopar::runAdamW(const KernelArgs &A) { return runAdamWGroup(A); }

Error autopar::runSgd(const KernelArgs &A) {
  if (Error E = checkParamLike(A, {0, 1}))
    return E;
  Expected<bool> Skip = isSkipped(A, 4);
  if (!Skip)
    return Skip.takeError();
  if (*Skip) {
    keepOperands(A);
    return Error::success();
  }
  double Lr = scalarOperand(A, 2), Wd = scalarOperand(A, 3);
  const float *P = A.In[0].data<float>(), *G = A.In[1].data<float>();
  float *PO = A.Out[0].data<float>();
  for (int64_t I = 0, N = A.In[0].getNumElements(); I != N; ++I)
    PO[I] = float(P[I] - Lr * (G[I] + Wd * P[I]));
  return Error::success();
}
