//===- ModelProfile.cpp - Per-layer costs of a model under a layout -------===//

#include "planner/ModelProfile.h"

#include "cost/Collectives.h"
#include "cost/HeldParams.h"

#include "ir/Graph.h"
#include "ir/OpLoops.h"
#include "passes/ShardGraph.h"

#include "llvm/ADT/DenseMap.h"
#include "llvm/ADT/SmallPtrSet.h"

#include <algorithm>
#include <iterator>

using namespace autopar;
using namespace llvm;

ModelProfile::ModelProfile(Graph &G, const Cluster &Cl,
                           const CostSettings &Settings)
    : G(G), Cl(Cl), Settings(Settings) {}

Expected<std::unique_ptr<ModelProfile>>
ModelProfile::create(Graph &G, const Cluster &Cl,
                     const CostSettings &Settings) {
  std::unique_ptr<ModelProfile> P(new ModelProfile(G, Cl, Settings));
  if (Error E = P->init())
    return E;
  return P;
}

static Error error(const Twine &Message) {
  return createStringError(inconvertibleErrorCode(), Message);
}

Error ModelProfile::init() {
  // The batch dimension, from the first input that has one.
  for (const std::unique_ptr<Value> &In : G.getInputs()) {
    const Attribute *A = In->getAttrs().get("batch_dim");
    if (!A || !A->isa(Attribute::Kind::Int))
      continue;
    int64_t D = A->getInt();
    if (D < 0 || D >= int64_t(In->getType().getRank()))
      continue;
    const Dim &Batch = In->getType().getDim(D);
    if (Batch.isStatic())
      FixedBatch = Batch.getSize();
    else if (Batch.isSymbolic() && Batch.getSymbols().size() == 1 &&
             Batch.getCoefficient() == 1)
      BatchSymbol = Batch.getSymbols()[0];
    else
      return error("graph input '%" + In->getName() +
                   "' has a batch dimension that is not a plain symbol");
    TokensPerSample = 1;
    for (unsigned I = 0, E = In->getType().getRank(); I != E; ++I)
      if (int64_t(I) != D) {
        const Dim &X = In->getType().getDim(I);
        if (!X.isStatic())
          return error("graph input '%" + In->getName() + "' dimension " +
                       Twine(I) +
                       " is not static; bind it with --dim NAME=SIZE");
        TokensPerSample *= X.getSize();
      }
    break;
  }
  if (BatchSymbol.empty() && !FixedBatch)
    return error("no graph input has a batch dimension; name it with "
                 "--batch-dim");
  // Every type must be static once the batch is bound.
  auto Remember = [&](Value *V) -> Error {
    for (const Dim &D : V->getType().getShape())
      for (const std::string &S : D.getSymbols())
        if (S != BatchSymbol)
          return error("value '%" + V->getName() +
                       "' has the unbound "
                       "dimension '" +
                       S + "'; bind it with --dim " + S + "=SIZE");
    for (const Dim &D : V->getType().getShape())
      if (D.isUnknown())
        return error("value '%" + V->getName() +
                     "' has a dimension of unknown size");
    SymbolicTypes.push_back({V, V->getType()});
    return Error::success();
  };
  for (const std::unique_ptr<Value> &V : G.getInputs())
    if (Error E = Remember(V.get()))
      return E;
  for (const std::unique_ptr<Value> &V : G.getParams())
    if (Error E = Remember(V.get()))
      return E;
  for (Node &N : G.getNodes())
    for (unsigned R = 0, E = N.getNumResults(); R != E; ++R)
      if (Value *V = N.getResult(R))
        if (Error Err = Remember(V))
          return Err;
  bindBatch(FixedBatch.value_or(1));
  Flow = std::make_unique<GradientFlow>(G);
  Units = getLayerUnits(G, *Flow);
  if (Units.empty())
    return error("the graph computes nothing from its inputs");
  // Parameters that more than one unit holds (tied embeddings).
  DenseMap<const Value *, unsigned> Holders;
  auto Unsplit = [](unsigned) { return LoopSplit(); };
  for (const LayerUnit &U : Units) {
    for (const HeldParam &H : getHeldParams(U.Nodes, Unsplit, *Flow))
      if (++Holders[H.Param] == 2)
        SharedParams.insert(H.Param);
    for (const HeldParam &H : getFrozenParams(U.Nodes, Unsplit, *Flow))
      if (++Holders[H.Param] == 2)
        SharedParams.insert(H.Param);
  }
  for (const std::unique_ptr<Value> &P : G.getParams())
    if (Flow->needsGrad(P.get()))
      TotalParams += double(P->getType().getStaticNumElements().value_or(0));
  for (const Node &N : G.getNodes()) {
    // Decomposed attention: the softmax over [batch, heads, q, k] scores.
    if (N.getOp() == OpId::Softmax && !Heads) {
      const TensorType &T = N.getOperand(0)->getType();
      if (T.getRank() == 4 && T.getDim(1).isStatic() &&
          T.getDim(2) == T.getDim(3))
        Heads = T.getDim(1).getSize();
    }
    if (N.getOp() == OpId::Attention && !Heads) {
      const Value *Q = N.getOperand(0);
      if (Q->getType().getRank() == 4 && Q->getType().getDim(1).isStatic())
        Heads = Q->getType().getDim(1).getSize();
      else if (const Attribute *A = N.getAttr("q_num_heads"))
        Heads = A->isa(Attribute::Kind::Int) ? A->getInt() : 0;
    }
  }
  return Error::success();
}

void ModelProfile::bindBatch(int64_t Size) {
  for (auto &[V, T] : SymbolicTypes) {
    SmallVector<Dim, 4> Shape;
    for (const Dim &D : T.getShape()) {
      if (!D.isSymbolic()) {
        Shape.push_back(D);
        continue;
      }
      Dim R = Dim::get(D.getCoefficient());
      for (const std::string &S : D.getSymbols())
        R = R * (S == BatchSymbol ? Dim::get(Size) : Dim::getSymbol(S));
      Shape.push_back(R);
    }
    V->setType(TensorType(T.getElementType(), Shape));
  }
}

Expected<std::unique_ptr<GraphSharding>> ModelProfile::shard(unsigned TP,
                                                             bool SP) {
  GraphShardingOptions O;
  O.Group = getRankGroup(TP, 1, Cl.GpusPerNode);
  O.SplitTokens = SP && TP > 1;
  O.OutputsFeedLoss = true;
  O.MicroBatches = 1;
  O.Cl = &Cl;
  O.Settings = &Settings;
  O.Flow = Flow.get();
  return shardGraph(G, Units, O);
}

Expected<const std::vector<UnitCost> *>
ModelProfile::getUnitCosts(unsigned TP, bool SP, int64_t MicroBatch) {
  if (FixedBatch && MicroBatch != *FixedBatch)
    return error("the model fixes the batch size to " + Twine(*FixedBatch) +
                 "; the micro-batch size must be " + Twine(*FixedBatch));
  auto Key = std::make_tuple(TP, SP, MicroBatch);
  auto It = Cache.find(Key);
  if (It != Cache.end())
    return &It->second;
  bindBatch(MicroBatch);
  Expected<std::vector<UnitCost>> Costs = compute(TP, SP);
  bindBatch(FixedBatch.value_or(1));
  if (!Costs)
    return Costs.takeError();
  return &Cache.emplace(Key, std::move(*Costs)).first->second;
}

Expected<std::vector<UnitCost>> ModelProfile::compute(unsigned TP, bool SP) {
  Expected<std::unique_ptr<GraphSharding>> Sharding = shard(TP, SP);
  if (!Sharding)
    return Sharding.takeError();
  std::vector<UnitCost> Out;
  // Units of one class that share a solution cost the same.
  DenseMap<const ShardingSolution *, unsigned> Done;
  for (unsigned I = 0; I != Units.size(); ++I) {
    const LayerUnit &U = Units[I];
    const ShardingSolution &Sol = *(*Sharding)->Units[I];
    auto Seen = Done.find(&Sol);
    // The unit's own parameters: Sol may have been solved on another unit
    // of the class, whose HeldParams name that unit's.
    auto GetShared = [&](bool Frozen) {
      std::vector<HeldParam> Shared;
      if (SharedParams.empty())
        return Shared;
      auto SplitOf = [&](unsigned K) { return Sol.Splits[K]; };
      for (const HeldParam &H : Frozen
                                    ? getFrozenParams(U.Nodes, SplitOf, *Flow)
                                    : getHeldParams(U.Nodes, SplitOf, *Flow))
        if (SharedParams.contains(H.Param))
          Shared.push_back(H);
      return Shared;
    };
    if (Seen != Done.end() && Units[Seen->second].Class == U.Class) {
      Out.push_back(Out[Seen->second]);
      Out.back().SharedParams = GetShared(/*Frozen=*/false);
      Out.back().SharedFrozen = GetShared(/*Frozen=*/true);
      continue;
    }
    Done.insert({&Sol, I});
    UnitCost C;
    C.FwdSeconds = Sol.FwdComputeSeconds + Sol.FwdCommSeconds;
    C.BwdSeconds = Sol.BwdComputeSeconds + Sol.BwdCommSeconds;
    C.FwdCommSeconds = Sol.FwdCommSeconds;
    C.BwdCommSeconds = Sol.BwdCommSeconds;
    std::copy(std::begin(Sol.FwdCollectiveSeconds),
              std::end(Sol.FwdCollectiveSeconds), C.FwdCollectiveSeconds);
    std::copy(std::begin(Sol.BwdCollectiveSeconds),
              std::end(Sol.BwdCollectiveSeconds), C.BwdCollectiveSeconds);
    C.GradSyncSeconds = Sol.GradSyncSeconds;
    C.ParamElements = Sol.ParamElements;
    C.SharedParams = GetShared(/*Frozen=*/false);
    C.Held = Sol.HeldParams;
    C.FrozenBytes = Sol.FrozenBytes;
    C.SharedFrozen = GetShared(/*Frozen=*/true);
    DenseMap<const Node *, LoopSplit> Splits;
    for (unsigned K = 0; K != U.Nodes.size(); ++K)
      Splits[U.Nodes[K]] = Sol.Splits[K];
    auto SplitOf = [&](const Node &N) { return Splits.lookup(&N); };
    for (Recompute R : {Recompute::None, Recompute::Selective, Recompute::Full})
      C.SavedBytes[unsigned(R)] =
          savedActivationBytes(U.Nodes, SplitOf, R, *Flow, Settings);
    C.BackwardExcessBytes =
        backwardExcessBytes(U.Nodes, SplitOf, *Flow, Settings);
    C.RecomputedBytes =
        recomputedActivationBytes(U.Nodes, SplitOf, *Flow, Settings);
    SmallPtrSet<const Node *, 32> Inside(U.Nodes.begin(), U.Nodes.end());
    for (const Node *N : U.Nodes) {
      std::optional<OpLoops> L = getOpLoops(*N);
      NodeCost Whole =
          getNodeCost(*N, L, LoopSplit(), Cl.Device, Settings, *Flow);
      C.FwdFlops += Whole.FwdFlops;
      C.BwdFlops += Whole.BwdFlops;
      if (N->getOp() == OpId::Opaque) {
        NodeCost Local =
            getNodeCost(*N, L, Splits.lookup(N), Cl.Device, Settings, *Flow);
        C.OpaqueSeconds += Local.FwdSeconds + Local.BwdSeconds;
      }
      if (N->getOp() == OpId::Attention) {
        C.AttentionCoreFlops += Whole.FwdFlops;
        C.AttentionCoreSeconds +=
            getNodeCost(*N, L, Splits.lookup(N), Cl.Device, Settings, *Flow)
                .FwdSeconds;
      }
      for (unsigned R = 0, E = N->getNumResults(); R != E; ++R) {
        const Value *V = N->getResult(R);
        if (!V || !Flow->isActivation(V))
          continue;
        bool Outside = V->getNumOutputUses() != 0;
        for (const Node *User : V->getUsers())
          Outside |= !Inside.count(User);
        if (!Outside)
          continue;
        auto Layout = Sol.Layouts.find(V);
        double Elements =
            double(V->getType().getStaticNumElements().value_or(0));
        int Lay =
            Layout == Sol.Layouts.end() ? LayoutReplicated : Layout->second;
        double Local = Lay == LayoutReplicated ? Elements : Elements / TP;
        if (V->getNumOutputUses()) {
          // Logits: the loss keeps them in fp32 for its gradient, which
          // the gradient's fp32 result joins before the head's backward
          // frees either (measured on the CPU runtime: both are live at
          // the activation peak, bench/plan-vs-run.sh).
          C.LossBytes += 2 * Local * 4;
        } else {
          // Sent at the boundary layout.
          int B = (*Sharding)->Boundary;
          C.OutputReplicated = B == LayoutReplicated;
          C.OutputBytes += (B == LayoutReplicated ? Elements : Elements / TP) *
                           trainingElementBytes(*V, Settings);
        }
      }
    }
    Out.push_back(C);
  }
  return Out;
}

Expected<std::vector<OpCostDetail>>
ModelProfile::getOpCosts(unsigned Unit, unsigned TP, bool SP,
                         int64_t MicroBatch) {
  if (FixedBatch && MicroBatch != *FixedBatch)
    return error("the model fixes the batch size to " + Twine(*FixedBatch));
  if (Unit >= Units.size())
    return error("the model has " + Twine(Units.size()) + " units, not " +
                 Twine(Unit + 1));
  bindBatch(MicroBatch);
  Expected<std::vector<OpCostDetail>> Ops = computeOps(Unit, TP, SP);
  bindBatch(FixedBatch.value_or(1));
  return Ops;
}

Expected<std::vector<OpCostDetail>>
ModelProfile::computeOps(unsigned Unit, unsigned TP, bool SP) {
  Expected<std::unique_ptr<GraphSharding>> Sharding = shard(TP, SP);
  if (!Sharding)
    return Sharding.takeError();
  const ShardingSolution &Sol = *(*Sharding)->Units[Unit];
  std::vector<OpCostDetail> Out;
  for (unsigned K = 0; K != Units[Unit].Nodes.size(); ++K) {
    OpCostDetail D;
    D.N = Units[Unit].Nodes[K];
    D.Cost = getShardedNodeCost(*D.N, getOpLoops(*D.N), Sol.Splits[K],
                                Cl.Device, Settings, *Flow);
    Out.push_back(std::move(D));
  }
  for (const PlacedCollective &C : Sol.Collectives)
    if (C.Node < Out.size())
      Out[C.Node].Collectives.push_back(C);
  return Out;
}

Error ModelProfile::bindMicroBatch(int64_t MicroBatch) {
  if (FixedBatch && MicroBatch != *FixedBatch)
    return error("the model fixes the batch size to " + Twine(*FixedBatch));
  bindBatch(MicroBatch);
  return Error::success();
}

std::vector<unsigned> ModelProfile::getRepeatedUnits() const {
  std::map<unsigned, unsigned> Count;
  for (const LayerUnit &U : Units)
    ++Count[U.Class];
  unsigned Best = 0, BestCount = 0;
  for (const LayerUnit &U : Units)
    if (Count[U.Class] > BestCount) {
      Best = U.Class;
      BestCount = Count[U.Class];
    }
  std::vector<unsigned> Repeated;
  for (unsigned I = 0; I != Units.size(); ++I)
    if (Units[I].Class == Best)
      Repeated.push_back(I);
  return Repeated;
}

/// What a rank holding units Ranges keeps: each unit's Total, less Size of
/// a parameter that Shared lists again after the first unit holding it.
static double
heldOnce(ArrayRef<UnitCost> Costs,
         ArrayRef<std::pair<unsigned, unsigned>> Ranges,
         function_ref<double(const UnitCost &)> Total,
         function_ref<ArrayRef<HeldParam>(const UnitCost &)> Shared,
         function_ref<double(const HeldParam &)> Size) {
  double Held = 0;
  SmallPtrSet<const Value *, 4> Seen;
  for (auto [Begin, End] : Ranges)
    for (unsigned U = Begin; U != End; ++U) {
      Held += Total(Costs[U]);
      for (const HeldParam &H : Shared(Costs[U]))
        if (!Seen.insert(H.Param).second)
          Held -= Size(H);
    }
  return Held;
}

double
autopar::heldParamElements(ArrayRef<UnitCost> Costs,
                           ArrayRef<std::pair<unsigned, unsigned>> Ranges) {
  return heldOnce(
      Costs, Ranges, [](const UnitCost &C) { return C.ParamElements; },
      [](const UnitCost &C) { return ArrayRef<HeldParam>(C.SharedParams); },
      [](const HeldParam &H) { return H.Elements; });
}

double
autopar::heldFrozenBytes(ArrayRef<UnitCost> Costs,
                         ArrayRef<std::pair<unsigned, unsigned>> Ranges) {
  return heldOnce(
      Costs, Ranges, [](const UnitCost &C) { return C.FrozenBytes; },
      [](const UnitCost &C) { return ArrayRef<HeldParam>(C.SharedFrozen); },
      [](const HeldParam &H) { return getFrozenBytes(H); });
}
