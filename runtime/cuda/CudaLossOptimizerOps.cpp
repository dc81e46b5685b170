//===- CudaLossOptimizerOps.cpp - The loss and optimizers on the device ---===//
//
// CrossEntropyLoss and its gradient (labels checked on the device, sums in
// f64 scratch); AdamW and Sgd steps in place on the executor's buffers,
// their scalars as one-element f32 device tensors.
//
//===----------------------------------------------------------------------===//

#include "runtime/cuda/CudaOpSupport.h"

#include "ir/Graph.h"
#include "runtime/OpShapes.h"

#include <algorithm>
#include <cstring>

using namespace autopar;
using namespace autopar::cuda;
using namespace llvm;

/// The loss's plan after the CUDA ops' checks of the form and the types.
static Expected<LossPlan> getLossShape(const KernelArgs &A, unsigned Logits,
                                       unsigned Labels) {
  if (Error E = checkFloat(A, Logits))
    return E;
  if (Error E = checkIndexType(A, Labels))
    return E;
  return planLoss(A, Logits, Labels);
}

Error cuda::runCrossEntropyLoss(const KernelArgs &A, CudaContext &C) {
  Expected<LossPlan> L = getLossShape(A, 0, 1);
  if (!L)
    return L.takeError();
  if (Error E = A.checkShape(0, {}))
    return E;
  if (Error E = checkFloatResult(A, 0))
    return E;
  Scratch S(C);
  Expected<Tensor> Work =
      S.get(A, ElementType::F64, {std::max<int64_t>(L->Rows, 1)});
  if (!Work)
    return Work.takeError();
  int Code =
      C.getErrorCode(A.N, "a label is outside [0, " + Twine(L->Classes) + ")");
  const Tensor &Labels = A.In[1];
  return launched(
      A, crossEntropy(dt(A.In[0]), A.In[0].getData(), Labels.getData(),
                      Labels.getElementType() == ElementType::I64, dt(A.Out[0]),
                      A.Out[0].getData(), L->Rows, L->Classes, L->Ignore,
                      L->Mean, Work->data<double>(), C.getErrorWord(), Code,
                      C.getStream()));
}

Error cuda::runCrossEntropyLossGrad(const KernelArgs &A, CudaContext &C) {
  Expected<LossPlan> L = getLossShape(A, 1, 2);
  if (!L)
    return L.takeError();
  if (!isCudaFloat(A.In[0].getElementType()) || A.In[0].getNumElements() != 1)
    return typeError(A, "operand 0", A.In[0], "one float");
  if (Error E = A.checkShape(0, A.In[1].getShape()))
    return E;
  if (Error E = checkFloatResult(A, 0))
    return E;
  Scratch S(C);
  Expected<Tensor> Work = S.get(A, ElementType::F64, {1});
  if (!Work)
    return Work.takeError();
  int Code =
      C.getErrorCode(A.N, "a label is outside [0, " + Twine(L->Classes) + ")");
  const Tensor &Labels = A.In[2];
  return launched(
      A, crossEntropyGrad(dt(A.In[0]), A.In[0].getData(), dt(A.In[1]),
                          A.In[1].getData(), Labels.getData(),
                          Labels.getElementType() == ElementType::I64,
                          dt(A.Out[0]), A.Out[0].getData(), L->Rows, L->Classes,
                          L->Ignore, L->Mean, Work->data<double>(),
                          C.getErrorWord(), Code, C.getStream()));
}

static Error checkParamLike(const KernelArgs &A,
                            std::initializer_list<unsigned> Operands) {
  for (unsigned I : Operands) {
    if (Error E = checkFloat(A, I))
      return E;
    if (A.In[I].getShape() != A.In[0].getShape())
      return A.error("operand " + Twine(I) + " " + A.In[I].getTypeString() +
                     " does not match the parameter " +
                     A.In[0].getTypeString());
  }
  for (unsigned I = 0; I != A.Out.size(); ++I) {
    if (Error E = A.checkShape(I, A.In[0].getShape()))
      return E;
    // The executor gives the updated parameters' own buffers.
    if (A.Out[I].getElementType() != A.In[I == 0 ? 0 : I + 1].getElementType())
      return A.error("result " + Twine(I) +
                     " must have the type of the "
                     "state it updates");
  }
  return Error::success();
}

static Error checkScalars(const KernelArgs &A, unsigned From, unsigned To) {
  for (unsigned I = From; I != To; ++I)
    if (!A.has(I) || A.In[I].getElementType() != ElementType::F32 ||
        A.In[I].getNumElements() != 1)
      return A.error("operand " + Twine(I) + " must be one f32");
  return Error::success();
}

/// Whether the optional `skip` operand I (loss scaling's found_inf, on the
/// device) says to skip the step: any value but 0, NaN included. Read to
/// the host, as AdamW's step is.
static Expected<bool> isSkipped(const KernelArgs &A, CudaContext &C,
                                unsigned I) {
  if (!A.has(I))
    return false;
  if (Error E = checkScalars(A, I, I + 1))
    return E;
  Expected<std::vector<uint8_t>> Skip = C.readToHost(A.In[I]);
  if (!Skip)
    return A.error(toString(Skip.takeError()));
  float Value;
  std::memcpy(&Value, Skip->data(), 4);
  return !(Value == 0.0f);
}

Error cuda::runAdamW(const KernelArgs &A, CudaContext &C) {
  if (Error E = checkParamLike(A, {0, 1, 2, 3}))
    return E;
  if (Error E = checkScalars(A, 4, 10))
    return E;
  // The step is a graph input; its host copy says whether it is valid.
  Expected<std::vector<uint8_t>> Step = C.readToHost(A.In[9]);
  if (!Step)
    return A.error(toString(Step.takeError()));
  float StepValue;
  std::memcpy(&StepValue, Step->data(), 4);
  if (StepValue < 1)
    return A.error("step must be 1 or more, got " + Twine(int64_t(StepValue)));
  AdamWScalars S{A.In[4].data<float>(), A.In[5].data<float>(),
                 A.In[6].data<float>(), A.In[7].data<float>(),
                 A.In[8].data<float>(), A.In[9].data<float>()};
  // In place on the results (the executor gives them the parameter's and
  // the moments' own buffers).
  for (unsigned I = 0; I != 3; ++I)
    if (Error E = copyDevice(A, C, A.Out[I], A.In[I == 0 ? 0 : I + 1]))
      return E;
  // A skipped step keeps them.
  Expected<bool> Skip = isSkipped(A, C, 10);
  if (!Skip || *Skip)
    return Skip.takeError();
  return launched(A, adamw(dt(A.Out[0]), A.Out[0].getData(), dt(A.In[1]),
                           A.In[1].getData(), dt(A.Out[1]), A.Out[1].getData(),
                           dt(A.Out[2]), A.Out[2].getData(),
                           A.In[0].getNumElements(), S, C.getStream()));
}

Error cuda::runSgd(const KernelArgs &A, CudaContext &C) {
  if (Error E = checkParamLike(A, {0, 1}))
    return E;
  if (Error E = checkScalars(A, 2, 4))
    return E;
  if (Error E = copyDevice(A, C, A.Out[0], A.In[0]))
    return E;
  Expected<bool> Skip = isSkipped(A, C, 4);
  if (!Skip || *Skip)
    return Skip.takeError();
  return launched(A, sgd(dt(A.Out[0]), A.Out[0].getData(), dt(A.In[1]),
                         A.In[1].getData(), A.In[0].getNumElements(),
                         A.In[2].data<float>(), A.In[3].data<float>(),
                         C.getStream()));
}
