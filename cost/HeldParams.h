//===- HeldParams.h - The parameters a unit of a model holds ----*- C++ -*-===//
//
// Which parameters a layer unit's nodes keep on one rank, and how many of
// their elements: the parameters they read directly, and those behind the
// parameter-derived values they read (computed once per step from
// parameters and constants, not activations: a tied LM head's transpose of
// the embedding table, a position table gathered at constant positions).
// Both the search (planner/ModelProfile.cpp, per unit) and the stage cut
// (passes/PartitionStages.cpp) count model states from it, so a parameter
// that two units read (tied embeddings) is held by both, and held once
// when both are on one rank.
//
// Only trained parameters (a gradient flows into them:
// GradientFlow::needsGrad) carry model states: a 16-bit weight and
// gradient, the optimizer's states and master copy, gradient
// synchronization and ZeRO's sharding and gathers. A frozen one (the
// integer weights and zero points of quantized ops, scales that only they
// read, bool masks) is held at its own bytes and nothing else
// (getFrozenParams, getFrozenBytes): no gradient flows into it, the
// optimizer does not update it (passes/InsertOptimizer.cpp steps the
// parameters that have a gradient) and insert-grad-sync neither syncs nor
// shards it.
//
//===----------------------------------------------------------------------===//

#ifndef AUTOPAR_COST_HELDPARAMS_H
#define AUTOPAR_COST_HELDPARAMS_H

#include "cost/OpCost.h"
#include "ir/OpLoops.h"

#include "llvm/ADT/ArrayRef.h"
#include "llvm/ADT/STLFunctionalExtras.h"
#include "llvm/ADT/SmallVector.h"

#include <optional>
#include <utility>
#include <vector>

namespace autopar {

class Node;
class Value;

/// The parameter V reads, through transposes, identities and casts, and the
/// layout of that parameter when V has Layout; null when V is not such a
/// view.
std::pair<const Value *, int> traceParam(const Value *V, int Layout);

/// A parameter held on one rank and its elements there.
struct HeldParam {
  const Value *Param = nullptr;
  double Elements = 0;
  /// The index of the node that reads it first: parameters with the same
  /// reader are used together (a fused Linear's weight and bias).
  unsigned FirstReader = 0;
  /// Its dimension 0 on this rank (after tensor parallelism), 0 for a
  /// scalar, and whether tensor parallelism splits that dimension. ZeRO
  /// shards a parameter along it (passes/InsertGradSync.cpp), padding the
  /// rows the data-parallel size does not divide, except where tensor
  /// parallelism splits them too: those stay whole.
  int64_t Rows = 0;
  bool RowsSplit = false;
  bool isShardable(unsigned DataParallel) const {
    return Rows > 0 && (!RowsSplit || Rows % DataParallel == 0);
  }
  /// The padding elements its shards add over DataParallel ranks.
  double paddingElements(unsigned DataParallel) const {
    if (!isShardable(DataParallel) || Rows % DataParallel == 0)
      return 0;
    int64_t Padded = (Rows + DataParallel - 1) / DataParallel * DataParallel;
    return Elements / double(Rows) * double(Padded - Rows);
  }
};

/// The trained parameters Nodes hold on one rank (Flow.needsGrad), each
/// once, in the order they are first read. SplitOf(K) gives node K's split.
/// A parameter read directly or through a view (traceParam) is split as its
/// reader splits that operand; one behind another computation is held
/// whole.
std::vector<HeldParam>
getHeldParams(llvm::ArrayRef<const Node *> Nodes,
              llvm::function_ref<LoopSplit(unsigned K)> SplitOf,
              const GradientFlow &Flow);

/// The frozen parameters Nodes hold on one rank (those getHeldParams leaves
/// out: no gradient flows into them), each once, split as getHeldParams
/// splits a trained one.
std::vector<HeldParam>
getFrozenParams(llvm::ArrayRef<const Node *> Nodes,
                llvm::function_ref<LoopSplit(unsigned K)> SplitOf,
                const GradientFlow &Flow);

/// The bytes H's elements take at its parameter's own element type (a
/// packed 4-bit weight as the u8 it is stored in, a bool mask a byte per
/// element), what a frozen parameter is held at.
double getFrozenBytes(const HeldParam &H);
/// The sum of getFrozenBytes over Frozen.
double sumFrozenBytes(llvm::ArrayRef<HeldParam> Frozen);
/// The bytes of the frozen parameters Nodes hold on one rank
/// (getFrozenParams at their own element size).
double getFrozenParamBytes(llvm::ArrayRef<const Node *> Nodes,
                           llvm::function_ref<LoopSplit(unsigned K)> SplitOf,
                           const GradientFlow &Flow);

/// The sum of Held's elements.
double sumElements(llvm::ArrayRef<HeldParam> Held);
/// The elements of Held that ZeRO over DataParallel ranks leaves whole
/// (HeldParam::isShardable).
double wholeElements(llvm::ArrayRef<HeldParam> Held, unsigned DataParallel);
/// The padding elements ZeRO's shards of Held add over DataParallel ranks.
double paddingElements(llvm::ArrayRef<HeldParam> Held, unsigned DataParallel);

/// The largest elements two neighbours hold together: of consecutive
/// parameters of Held when ByUse is false (what the optimizer step streams,
/// one parameter and the next one prefetched), of consecutive uses (the
/// parameters with one first reader) when true (what ZeRO-3 gathers and
/// offload fetches, one use and the next prefetched:
/// passes/InsertGradSync.cpp, passes/Offload.cpp). One alone when there is
/// only one.
double largestNeighbourElements(llvm::ArrayRef<HeldParam> Held, bool ByUse);
/// The elements of each parameter of Held, or of each use (consecutive
/// parameters with one first reader) when ByUse, in order.
llvm::SmallVector<double, 16> getGroupElements(llvm::ArrayRef<HeldParam> Held,
                                               bool ByUse);

} // namespace autopar

#endif // AUTOPAR_COST_HELDPARAMS_H
