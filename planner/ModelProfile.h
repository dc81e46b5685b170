//===- ModelProfile.h - Per-layer costs of a model --------------*- C++ -*-===//
//
// What the search needs to know about a model: its units (the embedding,
// the blocks, the head: passes/LayerUnits.h) and, for a tensor-parallel
// degree, sequence parallelism and a micro-batch size, each unit's time,
// activation memory, parameters and boundary size on one rank. The costs
// come from the sharding solver (passes/ShardGraph.h) over the per-op cost
// model (cost/), so they follow the layout the solver chose. The model's
// batch dimension stays symbolic; each micro-batch size binds it (the types
// are rebound in place and restored, nothing is re-imported). Results are
// cached per (tp, sp, micro-batch). For one unit it also gives each node's
// cost and the collectives placed at it (what `autopar explain` prints).
//
//===----------------------------------------------------------------------===//

#ifndef AUTOPAR_PLANNER_MODELPROFILE_H
#define AUTOPAR_PLANNER_MODELPROFILE_H

#include "cost/ActivationMemory.h"
#include "cost/Cluster.h"
#include "cost/HeldParams.h"
#include "cost/OpCost.h"
#include "ir/Types.h"
#include "passes/LayerUnits.h"
#include "passes/ShardingSolver.h"

#include "llvm/ADT/DenseSet.h"
#include "llvm/Support/Error.h"

#include <map>
#include <memory>
#include <optional>
#include <tuple>
#include <vector>

namespace autopar {

struct GraphSharding;

/// One unit on one rank for one micro-batch.
struct UnitCost {
  /// Compute plus the tensor-parallel collectives, forward and backward.
  double FwdSeconds = 0, BwdSeconds = 0;
  /// Once per step: all-reducing, inside the tensor-parallel group, the
  /// gradients of parameters it holds replicated while splitting their
  /// users (norm weights under sequence parallelism).
  double GradSyncSeconds = 0;
  double FwdCommSeconds = 0, BwdCommSeconds = 0;
  /// The collectives of FwdCommSeconds and BwdCommSeconds by kind (indexed
  /// by Collective). The last unit's FwdCommSeconds also holds the loss's
  /// softmax over the logits, which is in none of them.
  double FwdCollectiveSeconds[NumCollectives] = {};
  double BwdCollectiveSeconds[NumCollectives] = {};
  /// Forward time of the attention cores: what selective recomputation
  /// runs again.
  double AttentionCoreSeconds = 0;
  /// Forward and backward time of the ops autopar does not know (Opaque:
  /// priced by estimates of their FLOPs and bytes), on this rank.
  double OpaqueSeconds = 0;
  /// Bytes kept for the backward, by Recompute mode, and how far the
  /// unit's backward rises above them (cost/ActivationMemory.h).
  double SavedBytes[3] = {0, 0, 0};
  double BackwardExcessBytes = 0;
  /// What the unit's backward holds of its activations when full
  /// recomputation runs its forward again (recomputedActivationBytes).
  double RecomputedBytes = 0;
  /// Trained parameter elements held on this rank (cost/HeldParams.h), and
  /// those of them that other units hold too (a tied embedding table),
  /// which a rank holding several of those units keeps once
  /// (heldParamElements).
  double ParamElements = 0;
  std::vector<HeldParam> SharedParams;
  /// Bytes of the frozen parameters held on this rank (no gradient flows
  /// into them: quantized weights, their scales, bool masks), at their own
  /// element types (getFrozenBytes), and those of them that other units
  /// hold too, kept once per rank (heldFrozenBytes).
  double FrozenBytes = 0;
  std::vector<HeldParam> SharedFrozen;
  /// Those parameters, each once, in the order the unit first reads them
  /// (cost/HeldParams.h; of the unit the solution was found on, when units
  /// of a class share it: the sizes and uses are the same).
  std::vector<HeldParam> Held;
  /// Bytes handed to the next unit (a pipeline send), on this rank.
  double OutputBytes = 0;
  /// Whether that output is replicated over the tensor-parallel group (then
  /// each rank can send a 1/tp slice and the receivers all-gather it).
  bool OutputReplicated = true;
  /// Model FLOPs of the whole micro-batch (all ranks of the group):
  /// forward, backward, and the attention cores' forward.
  double FwdFlops = 0, BwdFlops = 0, AttentionCoreFlops = 0;
  /// fp32 logits that a cross-entropy keeps (the last unit), this rank.
  double LossBytes = 0;
};

/// One node of a unit on one rank for one micro-batch: its split and cost,
/// and the collectives the sharding solver places at it.
struct OpCostDetail {
  const Node *N = nullptr;
  ShardedNodeCost Cost;
  std::vector<PlacedCollective> Collectives;
};

/// Parameter elements that a rank holding units [Begin, End) of each of
/// Ranges keeps: each unit's, a parameter that several of them hold once.
double heldParamElements(llvm::ArrayRef<UnitCost> Costs,
                         llvm::ArrayRef<std::pair<unsigned, unsigned>> Ranges);
/// Frozen-parameter bytes that such a rank keeps, likewise: each unit's, a
/// frozen parameter that several of them hold once.
double heldFrozenBytes(llvm::ArrayRef<UnitCost> Costs,
                       llvm::ArrayRef<std::pair<unsigned, unsigned>> Ranges);

class ModelProfile {
public:
  /// G must be canonical with static shapes except its batch dimension
  /// (batch_dim on the inputs), and annotated by detect-layers.
  static llvm::Expected<std::unique_ptr<ModelProfile>>
  create(Graph &G, const Cluster &Cl, const CostSettings &Settings);

  llvm::ArrayRef<LayerUnit> getUnits() const { return Units; }
  /// The batch size when the model fixes it (a static batch dimension).
  std::optional<int64_t> getFixedBatch() const { return FixedBatch; }
  /// Tokens (non-batch elements of the first input) per sample.
  int64_t getTokensPerSample() const { return TokensPerSample; }
  /// Trainable parameter elements of the whole model.
  double getTotalParams() const { return TotalParams; }
  /// Heads of the attention ops, 0 when none (tensor parallelism should
  /// divide them).
  int64_t getAttentionHeads() const { return Heads; }
  /// The units of the most frequent class (the model's repeated blocks), in
  /// order; ties go to the class that comes first.
  std::vector<unsigned> getRepeatedUnits() const;

  /// Per unit, in order.
  llvm::Expected<const std::vector<UnitCost> *>
  getUnitCosts(unsigned TP, bool SP, int64_t MicroBatch);

  /// Unit Unit's nodes, in order, under the layout getUnitCosts prices.
  llvm::Expected<std::vector<OpCostDetail>>
  getOpCosts(unsigned Unit, unsigned TP, bool SP, int64_t MicroBatch);

  /// Leaves the graph's batch bound to MicroBatch, as the plan runs it
  /// (the plan pipeline of passes/PlanPipelines.h then lays it out).
  llvm::Error bindMicroBatch(int64_t MicroBatch);

private:
  ModelProfile(Graph &G, const Cluster &Cl, const CostSettings &Settings);
  llvm::Error init();
  void bindBatch(int64_t Size);
  /// The sharding solver over the graph as it is bound now.
  llvm::Expected<std::unique_ptr<GraphSharding>> shard(unsigned TP, bool SP);
  llvm::Expected<std::vector<UnitCost>> compute(unsigned TP, bool SP);
  llvm::Expected<std::vector<OpCostDetail>> computeOps(unsigned Unit,
                                                       unsigned TP, bool SP);

  Graph &G;
  Cluster Cl;
  CostSettings Settings;
  std::unique_ptr<GradientFlow> Flow;
  std::vector<LayerUnit> Units;
  /// Parameters, trained or frozen, that more than one unit holds.
  llvm::DenseSet<const Value *> SharedParams;
  std::string BatchSymbol;
  std::optional<int64_t> FixedBatch;
  int64_t TokensPerSample = 1;
  double TotalParams = 0;
  int64_t Heads = 0;
  /// Every value's type with the batch symbol, to rebind from.
  std::vector<std::pair<Value *, TensorType>> SymbolicTypes;
  std::map<std::tuple<unsigned, bool, int64_t>, std::vector<UnitCost>> Cache;
};

} // namespace autopar

#endif // AUTOPAR_PLANNER_MODELPROFILE_H
