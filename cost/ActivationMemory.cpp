//===- ActivationMemory.cpp - What the backward pass keeps, per op --------===//
//
// Per op, what its backward reads (each only when some operand needs a
// gradient, and only activations: parameters are model state):
//   MatMul Linear Gemm Einsum Conv   A when B needs a gradient, B when A does
//   Mul                              each operand, for the other's gradient
//   SwiGLU                           A, and B when A needs a gradient
//   Div                              the divisor; the dividend too when the
//                                    divisor needs a gradient
//   Pow Gelu Silu Erf Log Abs        the input
//   LeakyRelu
//   Tanh Sigmoid Exp Sqrt            the output
//   Reciprocal Relu Softmax
//   LogSoftmax
//   Dropout (ratio > 0)              the mask, 1 byte per element
//   Where                            the condition
//   LayerNormalization               the input, and fp32 mean and inverse
//   RMSNormalization                 standard deviation per row
//   BatchNormalization               the input
//   InstanceNormalization
//   MaxPool                          the input
//   Gather                           the indices
//   Attention                        Q, K, V; unfused: the probabilities
//                                    (attention core); fused: the output
//                                    (unless an output projection keeps
//                                    it, through views and transposes)
//                                    and the fp32 log-sum-exp per row
//   everything else                  nothing (adds, views, rotary, reduces)
//
//===----------------------------------------------------------------------===//

#include "cost/ActivationMemory.h"

#include "ir/Graph.h"
#include "ir/OpFacts.h"
#include "ir/OpRegistry.h"

#include "llvm/ADT/MapVector.h"
#include "llvm/ADT/SmallPtrSet.h"
#include "llvm/Support/Format.h"

using namespace autopar;
using namespace llvm;

double SavedTensor::bytes(LoopSplit Split) const {
  double E = Elements;
  if (Split.Degree > 1 && is_contained(Loops, Split.Loop))
    E /= Split.Degree;
  return E * BytesPerElement;
}

namespace {

class Collector {
public:
  Collector(const Node &N, const std::optional<OpLoops> &Loops,
            const GradientFlow &Flow, const CostSettings &Settings,
            SmallVectorImpl<SavedTensor> &Out)
      : N(N), Loops(Loops), Flow(Flow), Settings(Settings), Out(Out) {}

  /// Keeps operand I if it is an activation.
  void operand(unsigned I) {
    if (I >= N.getNumOperands() || !Flow.isActivation(N.getOperand(I)))
      return;
    add(N.getOperand(I), Loops ? Loops->Operands[I] : SmallVector<int, 4>(),
        trainingElementBytes(*N.getOperand(I), Settings));
  }
  void result(unsigned I, double BytesPerElement = 0) {
    if (I >= N.getNumResults() || !N.getResult(I))
      return;
    const Value *R = N.getResult(I);
    add(R, Loops ? Loops->Results[I] : SmallVector<int, 4>(),
        BytesPerElement ? BytesPerElement : trainingElementBytes(*R, Settings));
  }
  /// A tensor internal to the node with the given loops and elements.
  void internal(ArrayRef<int> LoopList, double Elements, double Bytes,
                bool Core) {
    SavedTensor T;
    T.Loops.assign(LoopList.begin(), LoopList.end());
    T.Elements = Elements;
    T.BytesPerElement = Bytes;
    T.AttentionCore = Core;
    Out.push_back(std::move(T));
  }
  bool needsGrad(unsigned I) const {
    return I < N.getNumOperands() && Flow.needsGrad(N.getOperand(I));
  }

private:
  void add(const Value *V, ArrayRef<int> Map, double Bytes) {
    SavedTensor T;
    T.V = V;
    T.Loops.assign(Map.begin(), Map.end());
    T.Elements = double(V->getType().getStaticNumElements().value_or(0));
    T.BytesPerElement = Bytes;
    Out.push_back(std::move(T));
  }

  const Node &N;
  const std::optional<OpLoops> &Loops;
  const GradientFlow &Flow;
  const CostSettings &Settings;
  SmallVectorImpl<SavedTensor> &Out;
};

/// Elements of result 0 with the last NormDims dimensions removed (rows).
double rowsOf(const Value *V, unsigned NormDims) {
  double Rows = 1;
  unsigned Rank = V->getType().getRank();
  for (unsigned I = 0; I + NormDims < Rank; ++I)
    if (V->getType().getDim(I).isStatic())
      Rows *= V->getType().getDim(I).getSize();
  return Rows;
}

/// Whether V reaches, through views and transposes only, the input of a
/// product that keeps it for its weight's gradient (an output projection):
/// flash attention's backward reads its output, and an implementation that
/// writes it in the projection's layout (Megatron-Core's [s, b, h]; the CPU
/// runtime) keeps that one tensor for both.
bool keptByProjection(const Value *V, const GradientFlow &Flow) {
  for (const Node *User : V->getUsers()) {
    // V's data only: a Shape of V, or V as a Reshape's shape, is not V.
    if (User->getNumOperands() == 0 || User->getOperand(0) != V)
      continue;
    KernelFamily K = getKernelFamily(User->getOp());
    if (K == KernelFamily::ReshapeLike || User->getOp() == OpId::Transpose) {
      if (User->getNumResults() && User->getResult(0) &&
          keptByProjection(User->getResult(0), Flow))
        return true;
      continue;
    }
    if ((K == KernelFamily::MatMul || K == KernelFamily::Linear ||
         K == KernelFamily::Gemm) &&
        User->getNumOperands() > 1 && Flow.needsGrad(User->getOperand(1)))
      return true;
  }
  return false;
}

void attentionSaved(const Node &N, const std::optional<OpLoops> &Loops,
                    const CostSettings &Settings, const GradientFlow &Flow,
                    Collector &C) {
  C.operand(0);
  C.operand(1);
  C.operand(2);
  C.operand(3);
  if (!Loops || Loops->getNumLoops() != 6)
    return;
  const Value *Q = N.getOperand(0), *K = N.getOperand(1);
  ArrayRef<Dim> QS = Q->getType().getShape(), KS = K->getType().getShape();
  if (!Q->getType().hasStaticShape() || !K->getType().hasStaticShape())
    return;
  double B = QS[0].getSize(), Heads, Sq, Skv;
  if (QS.size() == 4) {
    Heads = QS[1].getSize();
    Sq = QS[2].getSize();
    Skv = KS[2].getSize();
  } else {
    const Attribute *A = N.getAttr("q_num_heads");
    Heads = A && A->isa(Attribute::Kind::Int) ? A->getInt() : 1;
    Sq = QS[1].getSize();
    Skv = KS[1].getSize();
  }
  // Loops: B 0, H 1, Sq 2, Skv 3.
  if (Settings.Attention == AttentionKernel::Flash) {
    if (!keptByProjection(N.getResult(0), Flow))
      C.result(0);
    C.internal({0, 1, 2}, B * Heads * Sq, 4, /*Core=*/false);
  } else {
    // The probabilities, and with dropout its mask (a byte) and the dropped
    // probabilities: Korthikanti et al.'s 5as^2b in 16 bits.
    double Bytes = getPrecisionBytes(Settings.Compute);
    C.internal({0, 1, 2, 3}, B * Heads * Sq * Skv,
               getAttentionDropout(N) > 0 ? 2 * Bytes + 1 : Bytes,
               /*Core=*/true);
  }
}

} // namespace

void autopar::getSavedTensors(const Node &N,
                              const std::optional<OpLoops> &Loops,
                              const GradientFlow &Flow,
                              const CostSettings &Settings,
                              SmallVectorImpl<SavedTensor> &Out) {
  bool AnyGrad = false;
  for (const Value *O : N.getOperands())
    AnyGrad |= Flow.needsGrad(O);
  if (!AnyGrad)
    return;
  Collector C(N, Loops, Flow, Settings, Out);
  switch (getOpFacts(N.getOp()).Saved) {
  case SavedRule::None:
    return;
  case SavedRule::Product:
    // A's gradient reads B (SwiGLU: A and B), B's reads A (silu(A)).
    C.operand(0);
    if (C.needsGrad(0))
      C.operand(1);
    return;
  case SavedRule::Mul:
    if (C.needsGrad(1))
      C.operand(0);
    if (C.needsGrad(0))
      C.operand(1);
    return;
  case SavedRule::Div:
    C.operand(1);
    if (C.needsGrad(1))
      C.operand(0);
    return;
  case SavedRule::Input:
    C.operand(0);
    return;
  case SavedRule::Output:
    C.result(0);
    return;
  case SavedRule::Dropout:
    // Only in training mode (the identity otherwise, as the runtime runs
    // it: passes/DropoutStreams.cpp).
    if (dropsInTraining(N))
      C.internal(
          Loops ? ArrayRef<int>(Loops->Results[0]) : ArrayRef<int>(),
          double(N.getResult(0)->getType().getStaticNumElements().value_or(0)),
          1, /*Core=*/false);
    return;
  case SavedRule::Norm: {
    C.operand(0);
    const Value *X = N.getOperand(0);
    const Attribute *A = N.getAttr("axis");
    int64_t Axis = A && A->isa(Attribute::Kind::Int) ? A->getInt() : -1;
    int64_t Rank = X->getType().getRank();
    if (Axis < 0)
      Axis += Rank;
    unsigned NormDims = Axis >= 0 && Axis < Rank ? Rank - Axis : 1;
    SmallVector<int, 4> RowLoops;
    if (Loops)
      RowLoops.assign(Loops->Operands[0].begin(),
                      Loops->Operands[0].end() - NormDims);
    // Mean and inverse standard deviation in fp32 (RMSNorm: the latter).
    double Stats = N.getOp() == OpId::LayerNormalization ? 2 : 1;
    C.internal(RowLoops, rowsOf(X, NormDims), 4 * Stats, /*Core=*/false);
    return;
  }
  case SavedRule::Gather:
    if (C.needsGrad(0))
      C.operand(1);
    return;
  case SavedRule::Attention:
    attentionSaved(N, Loops, Settings, Flow, C);
    return;
  }
}

namespace {

/// What Nodes keep for their backward, without full recomputation (with
/// Selective, less the attention core): each kept value at the smallest of
/// its sizes on one rank, with the first node that keeps it, in insertion
/// order (so that sums round the same way on every run); and the tensors
/// internal to a node (V null), in node order.
struct KeptTensors {
  MapVector<const Value *, std::pair<double, unsigned>> Values;
  SmallVector<std::pair<double, unsigned>, 8> Internal;
};

KeptTensors getKeptTensors(ArrayRef<const Node *> Nodes,
                           function_ref<LoopSplit(const Node &)> SplitOf,
                           bool Selective, const GradientFlow &Flow,
                           const CostSettings &Settings, bool AsRead = false) {
  KeptTensors Kept;
  SmallVector<SavedTensor, 8> Saved;
  for (unsigned K = 0; K != Nodes.size(); ++K) {
    std::optional<OpLoops> Loops = getOpLoops(*Nodes[K]);
    LoopSplit Split = Loops ? SplitOf(*Nodes[K]) : LoopSplit();
    Saved.clear();
    getSavedTensors(*Nodes[K], Loops, Flow, Settings, Saved);
    for (const SavedTensor &T : Saved) {
      if (Selective && T.AttentionCore)
        continue;
      if (!T.V) {
        Kept.Internal.push_back({T.bytes(Split), K});
        continue;
      }
      auto [It, New] = Kept.Values.insert({T.V, {T.bytes(Split), K}});
      if (!New)
        It->second.first = AsRead ? std::max(It->second.first, T.bytes(Split))
                                  : std::min(It->second.first, T.bytes(Split));
    }
  }
  // Recomputed for a backward, a value is as its readers read it: the
  // clones gather again (passes/RecomputeLayers.cpp).
  if (AsRead)
    return Kept;
  // A value kept larger than its producer made it (gathered for a
  // product) is kept as produced and gathered again in backward
  // (Korthikanti et al. 2022, section 4.2.2).
  for (const Node *N : Nodes) {
    std::optional<OpLoops> Loops = getOpLoops(*N);
    LoopSplit Split = Loops ? SplitOf(*N) : LoopSplit();
    for (unsigned I = 0, E = N->getNumResults(); I != E; ++I) {
      const Value *R = N->getResult(I);
      auto It = R ? Kept.Values.find(R) : Kept.Values.end();
      if (It == Kept.Values.end())
        continue;
      double Produced = localElements(*R,
                                      Loops ? ArrayRef<int>(Loops->Results[I])
                                            : ArrayRef<int>(),
                                      Split) *
                        trainingElementBytes(*R, Settings);
      It->second.first = std::min(It->second.first, Produced);
    }
  }
  return Kept;
}

/// The bytes of everything Kept holds.
double sumKept(const KeptTensors &Kept) {
  double Total = 0;
  for (const auto &Entry : Kept.Internal)
    Total += Entry.first;
  for (const auto &Entry : Kept.Values)
    Total += Entry.second.first;
  return Total;
}

} // namespace

double autopar::savedActivationBytes(
    ArrayRef<const Node *> Nodes, function_ref<LoopSplit(const Node &)> SplitOf,
    Recompute Mode, const GradientFlow &Flow, const CostSettings &Settings) {
  if (Mode != Recompute::Full)
    return sumKept(getKeptTensors(Nodes, SplitOf, Mode == Recompute::Selective,
                                  Flow, Settings));
  double Total = 0;
  // Insertion order, so that the sum rounds the same way on every run.
  MapVector<const Value *, double> Kept;
  SmallPtrSet<const Node *, 32> Inside(Nodes.begin(), Nodes.end());
  for (const Node *N : Nodes) {
    std::optional<OpLoops> Loops = getOpLoops(*N);
    LoopSplit Split = Loops ? SplitOf(*N) : LoopSplit();
    for (unsigned I = 0, E = N->getNumOperands(); I != E; ++I) {
      const Value *O = N->getOperand(I);
      if (!O || !Flow.isActivation(O) || O->isParam() ||
          (O->getDefiningNode() && Inside.count(O->getDefiningNode())) ||
          Kept.count(O))
        continue;
      double Elements = localElements(
          *O, Loops ? ArrayRef<int>(Loops->Operands[I]) : ArrayRef<int>(),
          Split);
      Kept.insert({O, Elements * trainingElementBytes(*O, Settings)});
    }
  }
  for (const auto &[V, Bytes] : Kept)
    Total += Bytes;
  return Total;
}

double autopar::recomputedActivationBytes(
    ArrayRef<const Node *> Nodes, function_ref<LoopSplit(const Node &)> SplitOf,
    const GradientFlow &Flow, const CostSettings &Settings) {
  return sumKept(getKeptTensors(Nodes, SplitOf, /*Selective=*/false, Flow,
                                Settings, /*AsRead=*/true));
}

double autopar::backwardExcessBytes(
    ArrayRef<const Node *> Nodes, function_ref<LoopSplit(const Node &)> SplitOf,
    const GradientFlow &Flow, const CostSettings &Settings) {
  KeptTensors Kept =
      getKeptTensors(Nodes, SplitOf, /*Selective=*/false, Flow, Settings);
  // Freed after node K's backward: what K is the first to keep.
  std::vector<double> FreedAfter(Nodes.size(), 0);
  double SavedTotal = 0;
  for (auto [Bytes, K] : Kept.Internal) {
    SavedTotal += Bytes;
    FreedAfter[K] += Bytes;
  }
  for (const auto &Entry : Kept.Values) {
    SavedTotal += Entry.second.first;
    FreedAfter[Entry.second.second] += Entry.second.first;
  }
  // Each activation's bytes on one rank as its producer (or, for a layer
  // input, its first reader) lays it out: its gradient's size.
  DenseMap<const Value *, double> Size;
  for (const Node *N : Nodes) {
    std::optional<OpLoops> Loops = getOpLoops(*N);
    LoopSplit Split = Loops ? SplitOf(*N) : LoopSplit();
    auto Bytes = [&](const Value &V, ArrayRef<int> Map) {
      return localElements(V, Loops ? Map : ArrayRef<int>(), Split) *
             trainingElementBytes(V, Settings);
    };
    for (unsigned I = 0, E = N->getNumOperands(); I != E; ++I)
      if (const Value *O = N->getOperand(I))
        Size.try_emplace(O, Bytes(*O, Loops ? ArrayRef<int>(Loops->Operands[I])
                                            : ArrayRef<int>()));
    for (unsigned I = 0, E = N->getNumResults(); I != E; ++I)
      if (const Value *R = N->getResult(I))
        Size[R] = Bytes(*R, Loops ? ArrayRef<int>(Loops->Results[I])
                                  : ArrayRef<int>());
  }

  auto NeedsGrad = [&](const Value *V) {
    return V && !V->isParam() && Flow.isActivation(V) && Flow.needsGrad(V);
  };
  SmallPtrSet<const Node *, 32> Inside(Nodes.begin(), Nodes.end());
  SmallPtrSet<const Value *, 32> Grads;
  double Live = SavedTotal;
  // The gradients of the layer's outputs arrive from outside.
  for (const Node *N : Nodes)
    for (const Value *R : N->getResults()) {
      if (!NeedsGrad(R))
        continue;
      bool Outside = R->getNumOutputUses() != 0;
      for (const Node *U : R->getUsers())
        Outside |= !Inside.count(U);
      if (Outside && Grads.insert(R).second)
        Live += Size.lookup(R);
    }
  double Peak = Live;
  for (unsigned K = Nodes.size(); K-- > 0;) {
    const Node &N = *Nodes[K];
    // The node's backward makes a gradient term per operand; one that
    // already has a gradient is added to it and goes.
    SmallPtrSet<const Value *, 4> Seen;
    double Terms = 0;
    for (const Value *O : N.getOperands())
      if (NeedsGrad(O) && Seen.insert(O).second)
        Terms += Size.lookup(O);
    Peak = std::max(Peak, Live + Terms);
    for (const Value *O : Seen)
      if (Grads.insert(O).second)
        Live += Size.lookup(O);
    for (const Value *R : N.getResults())
      if (R && Grads.erase(R))
        Live -= Size.lookup(R);
    Live -= FreedAfter[K];
  }
  return std::max(0.0, Peak - SavedTotal);
}

ShardedNodeCost autopar::getShardedNodeCost(const Node &N,
                                            const std::optional<OpLoops> &Loops,
                                            LoopSplit Split,
                                            const DeviceSpec &Device,
                                            const CostSettings &Settings,
                                            const GradientFlow &Flow) {
  ShardedNodeCost C;
  C.Split = Split;
  C.Cost = getNodeCost(N, Loops, Split, Device, Settings, Flow);
  SmallVector<SavedTensor, 4> Saved;
  getSavedTensors(N, Loops, Flow, Settings, Saved);
  for (const SavedTensor &T : Saved)
    C.SavedBytes += T.bytes(Split);
  return C;
}

void autopar::printShardedNodeCost(raw_ostream &OS, const Node &N,
                                   const ShardedNodeCost &C) {
  OS << '%' << N.getResult(0)->getName() << " = " << N.getOpName() << " split=";
  if (C.Split.Degree > 1)
    OS << "loop " << C.Split.Loop << " of " << C.Split.Degree;
  else
    OS << "none";
  const NodeCost &Cost = C.Cost;
  OS << format(": fwd=%.3es bwd=%.3es flops=%.4g bytes=%.4g saved=%.4g\n",
               Cost.FwdSeconds, Cost.BwdSeconds, Cost.FwdFlops + Cost.BwdFlops,
               Cost.FwdBytes + Cost.BwdBytes, C.SavedBytes);
}
