//===- ActivationMemory.h - What the backward pass keeps -------*- C++ -*-===//
//
// Activation memory derived per op from what its backward needs (not from a
// per-layer formula): a product keeps the operands the other operand's
// gradient reads, GELU keeps its input, softmax its output, dropout a
// one-byte mask, a norm its input and row statistics, unfused attention its
// probabilities. Summed over a set of nodes with each value counted once,
// at its size on one rank under the nodes' splits, this gives Korthikanti
// et al. 2022's per-layer figures for a GPT layer (34sbh + 5as^2b bytes
// without parallelism, test/Unit/ActivationMemoryTest.cpp).
//
//===----------------------------------------------------------------------===//

#ifndef AUTOPAR_COST_ACTIVATIONMEMORY_H
#define AUTOPAR_COST_ACTIVATIONMEMORY_H

#include "cost/OpCost.h"

#include "llvm/ADT/STLFunctionalExtras.h"
#include "llvm/ADT/SmallVector.h"
#include "llvm/Support/raw_ostream.h"

namespace autopar {

// Recompute and its names are the plan's (ir/Plan.h).

/// One tensor a node's backward keeps.
struct SavedTensor {
  /// The value kept; null for a tensor internal to the node (attention
  /// probabilities).
  const Value *V = nullptr;
  /// The node's loop of each dimension (OpLoops::NoLoop for none).
  llvm::SmallVector<int, 4> Loops;
  /// Elements of the whole tensor, and bytes per element in training.
  double Elements = 0;
  double BytesPerElement = 0;
  /// Part of the attention core: selective recomputation drops it.
  bool AttentionCore = false;

  /// Bytes on one rank when the node splits Split.
  double bytes(LoopSplit Split) const;
};

/// The tensors N's backward keeps (nothing when no operand needs a
/// gradient).
void getSavedTensors(const Node &N, const std::optional<OpLoops> &Loops,
                     const GradientFlow &Flow, const CostSettings &Settings,
                     llvm::SmallVectorImpl<SavedTensor> &Out);

/// Bytes that Nodes (one layer, in graph order) keep for their backward on
/// one rank, per micro-batch. SplitOf gives each node's split. A value kept
/// by several nodes counts once, at the smallest of its sizes on one rank
/// (as its producer wrote it or as a user read it): a larger copy is
/// gathered again in backward. With full
/// recomputation only the layer's inputs (activations defined outside Nodes
/// and used inside) are kept, at the size their first user reads.
double savedActivationBytes(llvm::ArrayRef<const Node *> Nodes,
                            llvm::function_ref<LoopSplit(const Node &)> SplitOf,
                            Recompute Mode, const GradientFlow &Flow,
                            const CostSettings &Settings);

/// What a layer's backward holds of its activations when full recomputation
/// runs its forward again: savedActivationBytes without recomputation, but
/// each value at the largest size its keepers read (a gathered value is
/// gathered again by the recomputed forward, not kept split).
double
recomputedActivationBytes(llvm::ArrayRef<const Node *> Nodes,
                          llvm::function_ref<LoopSplit(const Node &)> SplitOf,
                          const GradientFlow &Flow,
                          const CostSettings &Settings);

/// How far the backward of Nodes (one layer, no recomputation) rises above
/// the bytes the layer keeps (savedActivationBytes), on one rank: walking
/// the nodes in reverse, the kept tensors still to be read plus the
/// gradients of activations alive at each node's backward (its results'
/// gradients and the ones it makes for its operands; a gradient lives from
/// its last reader's backward to its producer's; kept tensors go after
/// their first keeper's backward), less what the layer keeps. The
/// runtime's gradients of activations are buffers too; this is what they
/// add at the layer's backward.
double backwardExcessBytes(llvm::ArrayRef<const Node *> Nodes,
                           llvm::function_ref<LoopSplit(const Node &)> SplitOf,
                           const GradientFlow &Flow,
                           const CostSettings &Settings);

/// A node on one rank under a split: its cost and the bytes its backward
/// keeps (no recomputation). What test-print-cost and `autopar explain`
/// print per op.
struct ShardedNodeCost {
  LoopSplit Split;
  NodeCost Cost;
  double SavedBytes = 0;
};
ShardedNodeCost getShardedNodeCost(const Node &N,
                                   const std::optional<OpLoops> &Loops,
                                   LoopSplit Split, const DeviceSpec &Device,
                                   const CostSettings &Settings,
                                   const GradientFlow &Flow);
/// Prints `%y = Linear split=loop 2 of 8: fwd=1.2e-03s bwd=2.4e-03s
/// flops=F bytes=B saved=S` and a newline: flops and bytes of forward and
/// backward together.
void printShardedNodeCost(llvm::raw_ostream &OS, const Node &N,
                          const ShardedNodeCost &C);

} // namespace autopar

#endif // AUTOPAR_COST_ACTIVATIONMEMORY_H
