//===- DropoutStreams.cpp - Random streams for training-mode dropout ------===//
//
// `dropout-streams` prepares a training graph's dropouts for autodiff and
// the runtime. Every node that drops in training mode, in the graph's order
// (a Dropout whose constant training_mode is true and constant ratio is
// not 0; an Attention with `dropout` > 0), gets `rng_stream = 0, 1, ...`:
// the runtime draws its mask from the run's seed, the step, the stream, the
// micro-batch and each element's index in the whole tensor
// (runtime/DropoutStream.h), so that the copies of a node that later passes
// make (recomputation, micro-batches, pipeline stages) and the ranks that
// split its tensor draw the mask the node would draw alone. Such a Dropout
// also returns its mask (bool), which its gradient (DropoutGrad) reads, as
// PyTorch's dropout keeps it. A Dropout whose mode or ratio is not a
// constant is an error naming it. Run on the plan's whole graph, before
// extract-stage: every stage's program then numbers the model's dropouts
// the same way.
//
//===----------------------------------------------------------------------===//

#include "passes/Passes.h"

#include "ir/Diagnostics.h"
#include "ir/Graph.h"
#include "ir/OpRegistry.h"

#include <optional>

using namespace autopar;
using namespace llvm;

namespace {

class DropoutStreamsPass : public Pass {
public:
  StringRef getArgument() const override { return "dropout-streams"; }
  LogicalResult run(Module &M, DiagnosticEngine &Diag) override;

private:
  static void addMask(Graph &G, Node &N);
};

} // namespace

void DropoutStreamsPass::addMask(Graph &G, Node &N) {
  Value *Out = N.getResult(0);
  AttrDict Attrs = N.getAttrs();
  // One sharding per result: the mask is laid out as the output.
  if (const Attribute *S = Attrs.get("sharding"))
    if (S->isa(Attribute::Kind::Sharding))
      Attrs.set("sharding", Attribute::getList({*S, *S}));
  TensorType Mask(ElementType::Bool, Out->getType().getShape());
  G.replaceNode(N, OpId::Dropout, N.getOperands(), {Out->getType(), Mask},
                std::move(Attrs),
                {G.getUniqueName((Out->getName() + ".mask").str())});
}

LogicalResult DropoutStreamsPass::run(Module &M, DiagnosticEngine &Diag) {
  bool Failed = false;
  for (const std::unique_ptr<Graph> &G : M.getGraphs()) {
    SmallVector<Node *, 16> Masked;
    int64_t Stream = 0;
    for (Node &N : G->getNodes()) {
      if (N.getOp() == OpId::Dropout && !getDropoutSetting(N)) {
        Diag.error(N.getLoc(), "node '" + N.getName() +
                                   "' (Dropout): its ratio and training "
                                   "mode must be constants to train");
        Failed = true;
        continue;
      }
      if (!dropsInTraining(N))
        continue;
      N.getAttrs().set("rng_stream", Attribute::getInt(Stream++));
      if (N.getOp() == OpId::Dropout && N.getNumResults() < 2)
        Masked.push_back(&N);
    }
    for (Node *N : Masked)
      addMask(*G, *N);
  }
  return Failed ? failure() : success();
}

std::unique_ptr<Pass> autopar::createDropoutStreamsPass() {
  return std::make_unique<DropoutStreamsPass>();
}
