//===- RecomputeAttention.cpp - Selective activation recomputation --------===//
//
// `recompute-attention` lowers selective recomputation (Korthikanti et al.
// 2022, section 5; Megatron-LM's --recompute-granularity selective) in a
// training graph after autodiff: the attention core (the scores, the
// softmax and the product with V) is recomputed in the backward instead of
// kept. Every AttentionGrad that reads the probabilities an
// AttentionWithProbs kept (materialize-attention) drops them (with dropout:
// and the mask and the dropped probabilities) and recomputes them from Q, K
// and V, which the rest of the layer's backward keeps anyway, drawing the
// mask again from the node's random stream (`rng_stream`, dropout-streams);
// an AttentionWithProbs whose probabilities nothing reads any more becomes
// the Attention it was, so the runtime never holds them beyond the node.
// Both rebuilt nodes are annotated `attention_kernel = "materialized"`, so
// that a backend runs the kernel the plan priced (CUDA: cuBLAS products
// over the scores in scratch, not its flash kernels). The recomputed
// probabilities are the forward's bit for bit (the CPU and CUDA kernels
// compute them the same way in both places, and draw the same mask), so the
// losses are those of the plan without recomputation. Run before
// accumulate-micro-batches or schedule-pipeline, which copy each
// micro-batch's forward and backward.
//
//===----------------------------------------------------------------------===//

#include "passes/Passes.h"

#include "ir/Graph.h"

using namespace autopar;
using namespace llvm;

namespace {

/// AttentionGrad's operand holding the forward's probabilities.
constexpr unsigned ProbsOperand = 5;

class RecomputeAttentionPass : public GraphPass {
public:
  StringRef getArgument() const override { return "recompute-attention"; }

private:
  void runOnGraph(Graph &G) override;
  /// Replaces N by a node of Op on Operands with N's attributes and its
  /// first NumResults results (Graph::replaceNode).
  static Node *rebuild(Graph &G, Node &N, OpId Op, ArrayRef<Value *> Operands,
                       unsigned NumResults);
};

} // namespace

Node *RecomputeAttentionPass::rebuild(Graph &G, Node &N, OpId Op,
                                      ArrayRef<Value *> Operands,
                                      unsigned NumResults) {
  SmallVector<TensorType, 3> Types;
  for (unsigned I = 0; I != NumResults; ++I)
    Types.push_back(N.getResult(I)->getType());
  AttrDict Attrs = N.getAttrs();
  // The plan's kernel materializes the scores; a backend whose plain
  // Attention is tiled (CUDA's flash) would compute the core otherwise.
  Attrs.set("attention_kernel", Attribute::getString("materialized"));
  // One sharding per result (AttentionWithProbs back to Attention).
  if (const Attribute *A = Attrs.get("sharding"))
    if (A->isa(Attribute::Kind::List) && A->getList().size() != NumResults) {
      ArrayRef<Attribute> Kept = A->getList().take_front(NumResults);
      Attrs.set("sharding", NumResults == 1 ? Kept[0]
                                            : Attribute::getList(
                                                  {Kept.begin(), Kept.end()}));
    }
  return G.replaceNode(N, Op, Operands, Types, std::move(Attrs));
}

void RecomputeAttentionPass::runOnGraph(Graph &G) {
  SmallVector<Node *, 8> Grads;
  for (Node &N : G.getNodes())
    if (N.getOp() == OpId::AttentionGrad && N.getNumOperands() > ProbsOperand &&
        N.getOperand(ProbsOperand))
      Grads.push_back(&N);
  SmallVector<Node *, 8> Forwards;
  for (Node *N : Grads) {
    Value *Probs = N->getOperand(ProbsOperand);
    Node *Fwd = Probs->getDefiningNode();
    if (!Fwd || Fwd->getOp() != OpId::AttentionWithProbs)
      continue;
    rebuild(G, *N, OpId::AttentionGrad, N->getOperands().take_front(5),
            N->getNumResults());
    if (!llvm::is_contained(Forwards, Fwd))
      Forwards.push_back(Fwd);
  }
  for (Node *Fwd : Forwards) {
    // The probabilities (and with dropout the mask and dropped ones).
    bool Used = false;
    for (unsigned I = 1; I != Fwd->getNumResults(); ++I)
      Used |= Fwd->getResult(I)->hasUses();
    if (Used)
      continue;
    rebuild(G, *Fwd, OpId::Attention, Fwd->getOperands(), 1);
  }
}

std::unique_ptr<Pass> autopar::createRecomputeAttentionPass() {
  return std::make_unique<RecomputeAttentionPass>();
}
