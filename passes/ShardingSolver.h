//===- ShardingSolver.h - Exact tensor-parallel layouts ---------*- C++ -*-===//
//
// Chooses, for every node of a layer, which loop (ir/OpLoops.h) to split over
// the tensor-parallel group, or none, minimizing the layer's time on one
// rank: compute of each node under its split (cost/OpCost.h), the
// collectives that re-lay values out between producers and users in
// forward, the collectives that bring each value's summed gradient back to
// its producer's layout in backward, and the all-reduce of the gradients of
// parameters used replicated by split nodes (per step, so divided by the
// micro-batches). docs/Planner.md ("Sharding solver") describes the
// algorithm: a dynamic program over the nodes in order whose state is the
// layout of every value live across the cut, exact for the model above.
//
//===----------------------------------------------------------------------===//

#ifndef AUTOPAR_PASSES_SHARDINGSOLVER_H
#define AUTOPAR_PASSES_SHARDINGSOLVER_H

#include "cost/Collectives.h"
#include "cost/HeldParams.h"
#include "cost/OpCost.h"

#include "llvm/ADT/ArrayRef.h"
#include "llvm/ADT/DenseMap.h"
#include "llvm/Support/Error.h"

#include <optional>
#include <vector>

namespace autopar {

/// How a value lies over the tensor-parallel group: replicated, a partial
/// sum on every rank, or split along one dimension (Layout >= 0).
constexpr int LayoutReplicated = -1;
constexpr int LayoutPartial = -2;

/// The layout-to-collective rule, the one the solver prices and
/// insert-collectives emits: the collective that brings a value from
/// layout From to layout To (partial to replicated: AllReduce; partial to
/// split: ReduceScatter; split to replicated: AllGather; split to another
/// dimension: AllToAll), or none where To reads From as it is (the same
/// layout; a replicated value, of which each rank reads its part; a
/// partial sum wanted as one).
std::optional<Collective> getReshardCollective(int From, int To);

struct ShardingProblem {
  /// The nodes of the layer, in graph order.
  llvm::ArrayRef<const Node *> Nodes;
  /// The tensor-parallel degree and the group's placement.
  CommGroup Group;
  /// Sequence parallelism: whether loops over tokens (the dimensions of the
  /// layer's inputs other than the last) may be split.
  bool SplitTokens = false;
  /// The layout of the layer's activation inputs, and the layout its
  /// outputs must have (the next layer's input layout). A layout that does
  /// not divide a value's dimension falls back to replicated.
  int InputLayout = LayoutReplicated;
  int OutputLayout = LayoutReplicated;
  /// The graph's outputs are logits that a cross-entropy loss reads: they
  /// may stay split along their last (vocabulary) dimension, and the loss
  /// then all-reduces three floats per row (the maximum, the sum of
  /// exponentials and the target's logit; Megatron-LM's vocab-parallel
  /// cross-entropy, Shoeybi et al. 2019 section 3).
  bool OutputsFeedLoss = false;
  /// Layouts some parameters must have (a weight another layer also uses,
  /// as a tied embedding and LM head): strategies that would read them in
  /// another layout are not considered.
  llvm::DenseMap<const Value *, int> PinnedParams;
  /// Micro-batches per step: parameter-gradient all-reduces run once per
  /// step and are charged 1/MicroBatches per layer call.
  int64_t MicroBatches = 1;
  /// Only the dominance pruning, none of the others (conversion, bounds):
  /// slower, the same solution; tests use it to show that.
  bool Exhaustive = false;
  const Cluster *Cl = nullptr;
  const CostSettings *Settings = nullptr;
  const GradientFlow *Flow = nullptr;
};

/// One collective of a solution: the node it belongs to (an index into the
/// problem's nodes), whether it runs in forward or backward, the value it
/// re-lays out (a result of that node, or one of its operands), its size
/// (the nccl-tests convention of cost/Collectives.h) and its seconds. A
/// forward collective belongs to the node that reads the value in a new
/// layout, or for the layer's outputs to their producer; a backward one to
/// the producer of the value whose gradient it brings back (the last
/// reader for a layer input).
struct PlacedCollective {
  unsigned Node = 0;
  bool Backward = false;
  bool OnResult = false;
  unsigned Index = 0;
  Collective Kind = Collective::AllReduce;
  /// How many run (the vocabulary-parallel loss runs three), the size of
  /// each, and the seconds of all of them.
  unsigned Count = 1;
  double Bytes = 0, Seconds = 0;

  /// The value, given the node it belongs to.
  const Value *getValue(const autopar::Node &At) const;
};

struct ShardingSolution {
  /// Per node of the problem, in order.
  std::vector<LoopSplit> Splits;
  /// The forward layout of every value the nodes define.
  llvm::DenseMap<const Value *, int> Layouts;
  /// Seconds on one rank: compute, and collectives inside the layer (forward
  /// and backward), and the share of parameter-gradient all-reduces.
  double FwdComputeSeconds = 0, BwdComputeSeconds = 0;
  double FwdCommSeconds = 0, BwdCommSeconds = 0;
  double GradSyncSeconds = 0;
  /// The trained parameters held on one rank (cost/HeldParams.h), and the
  /// sum of their elements.
  std::vector<HeldParam> HeldParams;
  double ParamElements = 0;
  /// The frozen parameters held on one rank (no gradient flows into them:
  /// getFrozenParams), and their bytes at their own element types.
  std::vector<HeldParam> FrozenParams;
  double FrozenBytes = 0;
  /// The layout each parameter is read in, also through a transpose of it
  /// (a tied LM head reads the embedding table transposed).
  llvm::DenseMap<const Value *, int> ParamLayouts;
  /// Collectives in the solution, by kind, for reports and tests.
  unsigned AllReduces = 0, AllGathers = 0, ReduceScatters = 0, AllToAlls = 0;
  /// Each collective of FwdCommSeconds and BwdCommSeconds, and their
  /// seconds by kind (indexed by Collective). FwdCommSeconds also holds the
  /// loss's softmax over the logits, which is no collective.
  std::vector<PlacedCollective> Collectives;
  double FwdCollectiveSeconds[NumCollectives] = {};
  double BwdCollectiveSeconds[NumCollectives] = {};

  double totalSeconds() const {
    return FwdComputeSeconds + BwdComputeSeconds + FwdCommSeconds +
           BwdCommSeconds + GradSyncSeconds;
  }
};

/// Solves P exactly; fails only on a problem it cannot represent (too many
/// live values of one rank beyond its layout masks).
llvm::Expected<ShardingSolution> solveSharding(const ShardingProblem &P);

/// The candidate boundary layouts of a layer: replicated, and with
/// SplitTokens the sequence dimension (next to last) of its first
/// activation input.
std::vector<int> getBoundaryLayouts(llvm::ArrayRef<const Node *> Nodes,
                                    bool SplitTokens);

} // namespace autopar

#endif // AUTOPAR_PASSES_SHARDINGSOLVER_H
