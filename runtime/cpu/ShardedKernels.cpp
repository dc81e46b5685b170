//===- ShardedKernels.cpp - Kernels of ops split over a mesh axis ---------===//
//
// See ShardedKernels.h. The block of a rank is its position in the group of
// (mesh, axis) (runtime/MeshGroups.h) times the local size, as parameter
// shards are loaded (runtime/ParamInit.h). In a job of one rank the group is
// that rank alone, so each op is its unsplit form.
//
// The vocabulary-parallel cross-entropy is Megatron-LM's (Shoeybi et al.
// 2019, sec. 3): each rank holds a block of every row's classes; the row
// maximum is the maximum of the gathered block maxima, the sum of
// exponentials and the target logit are all-reduced. The communicator's
// sums are deterministic, so every rank computes the same loss.
//
//===----------------------------------------------------------------------===//

#include "runtime/cpu/ShardedKernels.h"
#include "runtime/OpShapes.h"
#include "runtime/ShardPlace.h"
#include "runtime/cpu/CpuCommunicator.h"

#include "ir/Graph.h"

#include <cmath>
#include <cstring>

using namespace autopar;
using namespace llvm;

static int64_t readIndex(const Tensor &Idx, int64_t K) {
  return Idx.getElementType() == ElementType::I64 ? Idx.data<int64_t>()[K]
                                                  : Idx.data<int32_t>()[K];
}

/// ShardSlice: this rank's block of In along `dim`.
static Error runShardSlice(const KernelArgs &A, const ShardPlace &P) {
  Expected<ShardSlicePlan> Plan = planShardSlice(A, P);
  if (!Plan)
    return Plan.takeError();
  int64_t Parts = P.Ranks.size();
  size_t Run = Plan->Run;
  const char *Src = static_cast<const char *>(A.In[0].getData());
  char *Dst = static_cast<char *>(A.Out[0].getData());
  for (int64_t O = 0; O != Plan->Outer; ++O)
    std::memcpy(Dst + O * Run, Src + (O * Parts + P.Index) * Run, Run);
  return Error::success();
}

/// Gather (axis 0) of this rank's rows [Offset, Offset + Rows): rows of
/// other ranks give zeros.
static Error runShardedGather(const KernelArgs &A, const ShardPlace &P) {
  if (Error E = A.checkType(1, {ElementType::I64, ElementType::I32}))
    return E;
  Expected<ShardedGatherPlan> Plan = planShardedGather(A, P);
  if (!Plan)
    return Plan.takeError();
  const Tensor &Data = A.In[0], &Idx = A.In[1];
  size_t Row = size_t(Plan->Inner) * getElementSize(Data.getElementType());
  const char *Src = static_cast<const char *>(Data.getData());
  char *Dst = static_cast<char *>(A.Out[0].getData());
  for (int64_t K = 0; K != Plan->Count; ++K) {
    int64_t I = readIndex(Idx, K);
    if (I < 0 || I >= Plan->Total)
      return A.error("index " + Twine(I) + " is outside [0, " +
                     Twine(Plan->Total) + ")");
    if (I >= Plan->Offset && I < Plan->Offset + Plan->Rows)
      std::memcpy(Dst + K * Row, Src + (I - Plan->Offset) * Row, Row);
    else
      std::memset(Dst + K * Row, 0, Row);
  }
  return Error::success();
}

/// GatherGrad of a vocabulary-parallel Gather: the rows this rank holds.
static Error runShardedGatherGrad(const KernelArgs &A, const ShardPlace &P) {
  if (Error E = A.checkType(0, {ElementType::F32}))
    return E;
  if (Error E = A.checkType(1, {ElementType::I64, ElementType::I32}))
    return E;
  if (Error E = A.checkType(2, {ElementType::F32}))
    return E;
  Expected<ShardedGatherPlan> Plan = planShardedGather(A, P);
  if (!Plan)
    return Plan.takeError();
  int64_t Inner = Plan->Inner;
  float *Out = A.Out[0].data<float>();
  std::fill_n(Out, A.In[0].getNumElements(), 0.0f);
  const float *Up = A.In[2].data<float>();
  for (int64_t K = 0; K != Plan->Count; ++K) {
    int64_t I = readIndex(A.In[1], K) - Plan->Offset;
    if (I < 0 || I >= Plan->Rows)
      continue;
    float *Row = Out + I * Inner;
    const float *Src = Up + K * Inner;
    for (int64_t J = 0; J != Inner; ++J)
      Row[J] += Src[J];
  }
  return Error::success();
}

namespace {

/// Per row of the logits: the global maximum, the log of the global sum of
/// exponentials and the target logit (0 for ignored rows).
struct RowStats {
  std::vector<float> Max, LogSum, Target;
  std::vector<int64_t> Labels;
  int64_t Rows = 0, Classes = 0, Offset = 0, Counted = 0, Ignore = -100;
};

} // namespace

static Expected<RowStats> getRowStats(const KernelArgs &A, const ShardPlace &P,
                                      unsigned LogitsAt, Communicator &Comm,
                                      Communicator::Duration Timeout) {
  if (Error E = A.checkType(LogitsAt, {ElementType::F32}))
    return E;
  if (Error E = A.checkType(LogitsAt + 1, {ElementType::I64, ElementType::I32}))
    return E;
  const Tensor &Z = A.In[LogitsAt], &Y = A.In[LogitsAt + 1];
  Expected<LossPlan> Plan = planLoss(A, LogitsAt, LogitsAt + 1);
  if (!Plan)
    return Plan.takeError();
  RowStats S;
  S.Classes = Plan->Classes;
  S.Rows = Plan->Rows;
  S.Offset = P.Index * S.Classes;
  S.Ignore = Plan->Ignore;
  int64_t Total = S.Classes * int64_t(P.Ranks.size());
  for (int64_t I = 0; I != S.Rows; ++I) {
    int64_t L = readIndex(Y, I);
    if (L != S.Ignore && (L < 0 || L >= Total))
      return A.error("label " + Twine(L) + " at row " + Twine(I) +
                     " is outside [0, " + Twine(Total) + ")");
    S.Counted += L != S.Ignore;
    S.Labels.push_back(L);
  }
  const float *ZD = Z.data<float>();
  int64_t Parts = P.Ranks.size();
  // The maximum: every rank's block maxima, gathered.
  std::vector<float> LocalMax(S.Rows), AllMax(S.Rows * Parts);
  for (int64_t I = 0; I != S.Rows; ++I) {
    float M = -INFINITY;
    for (int64_t J = 0; J != S.Classes; ++J)
      M = std::max(M, ZD[I * S.Classes + J]);
    LocalMax[I] = M;
  }
  CommunicationLabel Scope(P.Label);
  if (Error E = Comm.allGather(
          Tensor(ElementType::F32, {S.Rows}, LocalMax.data()),
          Tensor(ElementType::F32, {S.Rows * Parts}, AllMax.data()), P.Ranks, 0,
          Timeout))
    return E;
  S.Max.resize(S.Rows);
  for (int64_t I = 0; I != S.Rows; ++I) {
    float M = -INFINITY;
    for (int64_t R = 0; R != Parts; ++R)
      M = std::max(M, AllMax[R * S.Rows + I]);
    S.Max[I] = M;
  }
  // The sums of exponentials and the target logits, all-reduced together.
  std::vector<float> Sums(2 * S.Rows, 0.0f);
  for (int64_t I = 0; I != S.Rows; ++I) {
    const float *Row = ZD + I * S.Classes;
    double Sum = 0;
    for (int64_t J = 0; J != S.Classes; ++J)
      Sum += std::exp(double(Row[J]) - S.Max[I]);
    Sums[I] = float(Sum);
    int64_t L = S.Labels[I] - S.Offset;
    if (S.Labels[I] != S.Ignore && L >= 0 && L < S.Classes)
      Sums[S.Rows + I] = Row[L];
  }
  Tensor Both(ElementType::F32, {2 * S.Rows}, Sums.data());
  if (Error E = Comm.allReduce(Both, Both, P.Ranks, Timeout))
    return E;
  S.LogSum.resize(S.Rows);
  S.Target.assign(Sums.begin() + S.Rows, Sums.end());
  for (int64_t I = 0; I != S.Rows; ++I)
    S.LogSum[I] = std::log(Sums[I]);
  return S;
}

static Error runShardedCrossEntropy(const KernelArgs &A, const ShardPlace &P,
                                    Communicator &Comm,
                                    Communicator::Duration Timeout) {
  bool Grad = A.N.getOp() == OpId::CrossEntropyLossGrad;
  Expected<RowStats> S = getRowStats(A, P, Grad ? 1 : 0, Comm, Timeout);
  if (!S)
    return S.takeError();
  bool Mean = A.stringAttr("reduction", "mean") == "mean";
  if (!Grad) {
    if (Error E = A.checkShape(0, {}))
      return E;
    double Total = 0;
    for (int64_t I = 0; I != S->Rows; ++I)
      if (S->Labels[I] != S->Ignore)
        Total += double(S->Max[I]) + S->LogSum[I] - S->Target[I];
    if (Mean)
      Total = S->Counted ? Total / S->Counted : 0;
    A.Out[0].data<float>()[0] = float(Total);
    return Error::success();
  }
  if (Error E = A.checkType(0, {ElementType::F32}))
    return E;
  if (Error E = A.checkShape(0, A.In[1].getShape()))
    return E;
  double Scale = A.In[0].data<float>()[0];
  if (Mean)
    Scale = S->Counted ? Scale / S->Counted : 0;
  const float *Z = A.In[1].data<float>();
  float *DZ = A.Out[0].data<float>();
  for (int64_t I = 0; I != S->Rows; ++I) {
    const float *Row = Z + I * S->Classes;
    float *Out = DZ + I * S->Classes;
    if (S->Labels[I] == S->Ignore) {
      std::fill_n(Out, S->Classes, 0.0f);
      continue;
    }
    int64_t L = S->Labels[I] - S->Offset;
    for (int64_t J = 0; J != S->Classes; ++J) {
      double Prob = std::exp(double(Row[J]) - S->Max[I] - S->LogSum[I]);
      Out[J] = float(Scale * (Prob - (J == L ? 1.0 : 0.0)));
    }
  }
  return Error::success();
}

Error autopar::runShardedKernel(const KernelArgs &A, Communicator &Comm,
                                Communicator::Duration Timeout) {
  Expected<ShardPlace> P = getShardPlace(A, Comm);
  if (!P)
    return P.takeError();
  if (A.N.getOp() == OpId::ShardSlice)
    return runShardSlice(A, *P);
  if (A.N.getOp() == OpId::Gather)
    return runShardedGather(A, *P);
  if (A.N.getOp() == OpId::GatherGrad)
    return runShardedGatherGrad(A, *P);
  return runShardedCrossEntropy(A, *P, Comm, Timeout);
}
