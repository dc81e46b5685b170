//===- ShardGraph.h - Tensor-parallel layout of a whole graph ---*- C++ -*-===//
//
// Solves every unit of a graph (passes/LayerUnits.h) with the sharding
// solver, once per class: chooses the layout of the boundary between the
// repeated blocks (replicated, or with sequence parallelism split along a
// token dimension) that makes the blocks fastest, solves the first unit
// from replicated graph inputs and the last to replicated outputs (or to
// logits for a parallel cross-entropy), and gives a parameter read by
// several units (a tied embedding and LM head) the one layout that makes
// those units fastest together.
//
//===----------------------------------------------------------------------===//

#ifndef AUTOPAR_PASSES_SHARDGRAPH_H
#define AUTOPAR_PASSES_SHARDGRAPH_H

#include "passes/LayerUnits.h"
#include "passes/ShardingSolver.h"

#include "ir/Attributes.h"
#include "ir/OpLoops.h"

#include <map>
#include <memory>

namespace autopar {

struct GraphShardingOptions {
  CommGroup Group;
  bool SplitTokens = false;
  bool OutputsFeedLoss = true;
  int64_t MicroBatches = 1;
  /// ShardingProblem::Exhaustive.
  bool Exhaustive = false;
  const Cluster *Cl = nullptr;
  const CostSettings *Settings = nullptr;
  const GradientFlow *Flow = nullptr;
};

struct GraphSharding {
  int Boundary = LayoutReplicated;
  /// Per unit, in order; units of one class may share a solution.
  std::vector<const ShardingSolution *> Units;
  /// The layouts pinned for parameters that several units read.
  std::map<const Value *, int> PinnedParams;
  /// Owns the solutions, by class, boundary and pins.
  std::map<std::string, ShardingSolution> Solved;
};

llvm::Expected<std::unique_ptr<GraphSharding>>
shardGraph(const Graph &G, llvm::ArrayRef<LayerUnit> Units,
           const GraphShardingOptions &Options);

/// Records a solution as `sharding` annotations over mesh Mesh, axis Axis:
/// each node's results split, replicated or partial; each parameter as its
/// split users read it.
void annotateSharding(Graph &G, llvm::ArrayRef<LayerUnit> Units,
                      const GraphSharding &Sharding, llvm::StringRef Mesh,
                      llvm::StringRef Axis);

/// The layout that result Result's sharding annotation A records over mesh
/// axis Axis (a split dimension, LayoutPartial or LayoutReplicated); Mesh
/// receives the mesh's name.
int getAnnotatedLayout(const Attribute *A, unsigned Result,
                       llvm::StringRef Axis, std::string &Mesh);
/// The sharding annotation of a value of rank Rank in Layout.
Attribute makeSharding(int Layout, unsigned Rank, llvm::StringRef Mesh,
                       llvm::StringRef Axis);
/// The loop a node splits, read from its results' annotations: the loop a
/// split result maps, or the reduction loop a partial result leaves;
/// OpLoops::NoLoop when none.
int getAnnotatedSplitLoop(const Node &N, const OpLoops &L,
                          llvm::StringRef Axis);
/// The split a node's annotations record: its loop and the size of Axis in
/// the annotation's mesh; unsplit when there is none.
LoopSplit getAnnotatedSplit(const Node &N, const std::optional<OpLoops> &L,
                            llvm::StringRef Axis);

} // namespace autopar

#endif // AUTOPAR_PASSES_SHARDGRAPH_H
