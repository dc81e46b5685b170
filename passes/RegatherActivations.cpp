//===- RegatherActivations.cpp - Gather split activations again in backward
//===//
//
// `regather-activations` makes the backward of a tensor-parallel training
// graph (after autodiff and recomputation) read the activations that the
// forward all-gathered from their split form: for every forward AllGather
// of an activation whose whole result a backward node reads, a clone of the
// gather (`<result>.regather`) runs just before the first such reader, and
// every backward read goes to it. The forward's whole copy then lives only
// until its last forward reader, and what is kept for the backward is the
// split operand, 1/t of it: what Megatron-LM's sequence parallelism does
// (Korthikanti et al. 2022, section 4.2.2: the all-gather is done again in
// backward) and what the planner's activation memory assumes
// (cost/ActivationMemory.cpp keeps a gathered value as produced). The
// clone gathers the same bytes, so the losses are bit for bit those without
// it. The forward is what the graph's non-gradient outputs need
// (getForwardNodes); an activation is a value computed from the graph's
// inputs (GradientFlow; gathers of parameters, ZeRO's, come later, from
// insert-grad-sync). Run before accumulate-micro-batches or
// schedule-pipeline, which copy each micro-batch's forward and backward.
//
//===----------------------------------------------------------------------===//

#include "cost/OpCost.h"
#include "passes/GradientRules.h"
#include "passes/Passes.h"

#include "ir/Graph.h"

#include "llvm/ADT/DenseMap.h"
#include "llvm/ADT/SmallPtrSet.h"

using namespace autopar;
using namespace llvm;

namespace {

class RegatherActivationsPass : public GraphPass {
public:
  StringRef getArgument() const override { return "regather-activations"; }

private:
  void runOnGraph(Graph &G) override;
};

} // namespace

void RegatherActivationsPass::runOnGraph(Graph &G) {
  // The forward: what the non-gradient outputs need.
  SmallPtrSet<const Node *, 32> Forward = getForwardNodes(G);
  GradientFlow Flow(G);
  DenseMap<const Node *, unsigned> Order;
  SmallVector<Node *, 16> Gathers;
  unsigned Position = 0;
  for (Node &N : G.getNodes()) {
    Order[&N] = Position++;
    if (N.getOp() == OpId::AllGather && Forward.count(&N) &&
        N.getNumOperands() == 1 && N.getNumResults() == 1 &&
        Flow.isActivation(N.getOperand(0)))
      Gathers.push_back(&N);
  }
  for (Node *Gather : Gathers) {
    Value *Whole = Gather->getResult(0);
    SmallVector<Node *, 4> Readers;
    Node *First = nullptr;
    for (Node *U : Whole->getUsers())
      if (!Forward.count(U) && !is_contained(Readers, U)) {
        Readers.push_back(U);
        if (!First || Order.lookup(U) < Order.lookup(First))
          First = U;
      }
    if (Readers.empty() || is_contained(G.getOutputs(), Whole))
      continue;
    Node *Clone = G.createNode(
        OpId::AllGather, {Gather->getOperand(0)}, {Whole->getType()},
        Gather->getAttrs(),
        {G.getUniqueName((Whole->getName() + ".regather").str())}, First);
    if (!Gather->getName().empty())
      Clone->setName((Gather->getName() + ".regather").str());
    for (Node *U : Readers)
      for (unsigned I = 0; I != U->getNumOperands(); ++I)
        if (U->getOperand(I) == Whole)
          U->setOperand(I, Clone->getResult(0));
  }
}

std::unique_ptr<Pass> autopar::createRegatherActivationsPass() {
  return std::make_unique<RegatherActivationsPass>();
}
