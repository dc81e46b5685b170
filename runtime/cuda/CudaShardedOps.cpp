//===- CudaShardedOps.cpp - Ops split over a mesh axis on the device ------===//
//
// ShardSlice (this rank's block of a replicated value), and the
// vocabulary-parallel Gather, GatherGrad, CrossEntropyLoss and
// CrossEntropyLossGrad (`mesh_axis`), with the CPU kernels' semantics
// (runtime/cpu/ShardedKernels.cpp): the block of a rank is its position in
// the group of the axis (runtime/ShardPlace.h) times the local size. The
// cross-entropy gathers each row's block maxima and all-reduces the sums of
// exponentials and the target logits through the communicator (NCCL),
// between the kernels of ShardedKernels.cu; the compute stream waits for
// each collective's result before reading it.
//
//===----------------------------------------------------------------------===//

#include "runtime/cuda/CudaShardedOps.h"
#include "runtime/cuda/CudaOpSupport.h"

#include "ir/Graph.h"
#include "runtime/OpShapes.h"
#include "runtime/ShardPlace.h"
#include "runtime/cpu/CpuCommunicator.h"

using namespace autopar;
using namespace autopar::cuda;
using namespace llvm;

/// ShardSlice: this rank's block of In along `dim`, one strided copy.
static Error runShardSlice(const KernelArgs &A, CudaContext &C,
                           const ShardPlace &P) {
  Expected<ShardSlicePlan> Plan = planShardSlice(A, P);
  if (!Plan)
    return Plan.takeError();
  if (!Plan->Outer || !Plan->Run)
    return Error::success();
  size_t Run = Plan->Run, Parts = P.Ranks.size();
  const char *Src =
      static_cast<const char *>(A.In[0].getData()) + P.Index * Run;
  return launched(A,
                  cudaMemcpy2DAsync(A.Out[0].getData(), Run, Src, Run * Parts,
                                    Run, size_t(Plan->Outer),
                                    cudaMemcpyDeviceToDevice, C.getStream()));
}

static Error runShardedGather(const KernelArgs &A, CudaContext &C,
                              const ShardPlace &P) {
  if (Error E = checkIndexType(A, 1))
    return E;
  Expected<ShardedGatherPlan> Plan = planShardedGather(A, P);
  if (!Plan)
    return Plan.takeError();
  const Tensor &Data = A.In[0], &Idx = A.In[1], &Y = A.Out[0];
  if (Y.getElementType() != Data.getElementType())
    return A.error("the result must have the type of " + Data.getTypeString());
  int64_t InnerBytes =
      Plan->Inner * int64_t(getElementSize(Data.getElementType()));
  int Code =
      C.getErrorCode(A.N, "an index is outside [0, " + Twine(Plan->Total) +
                              "), the whole table's rows");
  return launched(A, shardedGather(Data.getData(), Idx.getData(),
                                   Idx.getElementType() == ElementType::I64,
                                   Y.getData(), Plan->Rows, Plan->Offset,
                                   Plan->Total, Plan->Count, InnerBytes,
                                   C.getErrorWord(), Code, C.getStream()));
}

static Error runShardedGatherGrad(const KernelArgs &A, CudaContext &C,
                                  const ShardPlace &P) {
  if (Error E = checkIndexType(A, 1))
    return E;
  if (Error E = checkFloat(A, 2))
    return E;
  if (Error E = checkFloatResult(A, 0))
    return E;
  Expected<ShardedGatherPlan> Plan = planShardedGather(A, P);
  if (!Plan)
    return Plan.takeError();
  const Tensor &Idx = A.In[1], &DY = A.In[2], &Out = A.Out[0];
  Scratch S(C);
  Expected<Tensor> SumsOr = getF32Sums(A, S, Out);
  if (!SumsOr)
    return SumsOr.takeError();
  const Tensor &Sums = *SumsOr;
  if (Error E = launched(
          A, shardedGatherGrad(
                 Idx.getData(), Idx.getElementType() == ElementType::I64,
                 dt(DY), DY.getData(), Sums.data<float>(), Plan->Rows,
                 Plan->Offset, Plan->Count, Plan->Inner, C.getStream())))
    return E;
  return castFromF32(A, C, Sums, Out);
}

/// The vocabulary-parallel loss (Grad: its gradient): block maxima,
/// gathered; block sums and target logits, all-reduced; then the kernel of
/// the result.
static Error runShardedCrossEntropy(const KernelArgs &A, CudaContext &C,
                                    const ShardPlace &P, Communicator &Comm,
                                    Communicator::Duration Timeout) {
  bool Grad = A.N.getOp() == OpId::CrossEntropyLossGrad;
  unsigned LogitsAt = Grad ? 1 : 0;
  if (Error E = checkFloat(A, LogitsAt))
    return E;
  if (Error E = checkIndexType(A, LogitsAt + 1))
    return E;
  if (Error E = checkFloatResult(A, 0))
    return E;
  Expected<LossPlan> L = planLoss(A, LogitsAt, LogitsAt + 1);
  if (!L)
    return L.takeError();
  const Tensor &Z = A.In[LogitsAt], &Labels = A.In[LogitsAt + 1];
  bool I64 = Labels.getElementType() == ElementType::I64;
  int64_t Rows = L->Rows, Classes = L->Classes;
  int64_t Parts = P.Ranks.size(), Offset = P.Index * Classes;
  int64_t Total = Classes * Parts;
  if (Grad) {
    if (!isCudaFloat(A.In[0].getElementType()) || A.In[0].getNumElements() != 1)
      return typeError(A, "operand 0", A.In[0], "one float");
    if (Error E = A.checkShape(0, Z.getShape()))
      return E;
  } else if (Error E = A.checkShape(0, {})) {
    return E;
  }
  int64_t R = std::max<int64_t>(Rows, 1);
  Scratch S(C);
  Expected<Tensor> Local = S.get(A, ElementType::F32, {R});
  Expected<Tensor> All = S.get(A, ElementType::F32, {R * Parts});
  Expected<Tensor> Max = S.get(A, ElementType::F32, {R});
  Expected<Tensor> Sums = S.get(A, ElementType::F32, {2 * R});
  Expected<Tensor> Counted = S.get(A, ElementType::F64, {1});
  for (Expected<Tensor> *T : {&Local, &All, &Max, &Sums, &Counted})
    if (!*T)
      return T->takeError();
  if (Error E = launched(A, vocabBlockMax(dt(Z), Z.getData(), Rows, Classes,
                                          Local->data<float>(), C.getStream())))
    return E;
  CommunicationLabel Scope(P.Label);
  Tensor LocalMax(ElementType::F32, {Rows}, Local->getData());
  Tensor AllMax(ElementType::F32, {Rows * Parts}, All->getData());
  if (Error E = Comm.allGather(LocalMax, AllMax, P.Ranks, 0, Timeout))
    return E;
  if (Error E = C.waitForCommunication({All->getData()}))
    return A.error(toString(std::move(E)));
  if (Error E = launched(A, vocabCombineMax(All->data<float>(), Parts, Rows,
                                            Max->data<float>(), C.getStream())))
    return E;
  int Code = C.getErrorCode(A.N, "a label is outside [0, " + Twine(Total) +
                                     "), the whole vocabulary");
  if (Error E =
          launched(A, vocabBlockSums(dt(Z), Z.getData(), Labels.getData(), I64,
                                     Rows, Classes, Offset, Total, L->Ignore,
                                     Max->data<float>(), Sums->data<float>(),
                                     C.getErrorWord(), Code, C.getStream())))
    return E;
  Tensor Both(ElementType::F32, {2 * Rows}, Sums->getData());
  if (Error E = Comm.allReduce(Both, Both, P.Ranks, Timeout))
    return E;
  if (Error E = C.waitForCommunication({Sums->getData()}))
    return A.error(toString(std::move(E)));
  if (!Grad)
    return launched(A, vocabLoss(Max->data<float>(), Sums->data<float>(),
                                 Labels.getData(), I64, Rows, L->Ignore,
                                 L->Mean, dt(A.Out[0]), A.Out[0].getData(),
                                 Counted->data<double>(), C.getStream()));
  return launched(A, vocabLossGrad(dt(A.In[0]), A.In[0].getData(), dt(Z),
                                   Z.getData(), Labels.getData(), I64, Rows,
                                   Classes, Offset, L->Ignore, L->Mean,
                                   Max->data<float>(), Sums->data<float>(),
                                   Counted->data<double>(), dt(A.Out[0]),
                                   A.Out[0].getData(), C.getStream()));
}

Error cuda::runShardedOp(const KernelArgs &A, CudaContext &C,
                         Communicator &Comm, Communicator::Duration Timeout) {
  Expected<ShardPlace> P = getShardPlace(A, Comm);
  if (!P)
    return P.takeError();
  if (A.N.getOp() == OpId::ShardSlice)
    return runShardSlice(A, C, *P);
  if (A.N.getOp() == OpId::Gather)
    return runShardedGather(A, C, *P);
  if (A.N.getOp() == OpId::GatherGrad)
    return runShardedGatherGrad(A, C, *P);
  return runShardedCrossEntropy(A, C, *P, Comm, Timeout);
}
