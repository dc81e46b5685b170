//===- Offload.cpp - Say when offloaded state moves -----------------------===//
//
// `offload` makes the moves of offloaded tensors explicit in a training
// program (docs/Offload.md). It runs after insert-optimizer, which placed
// the moments (`states=host|nvme`) and with ZeRO-3 the parameters
// (`params=host|nvme`) with the `placement` annotation. For every node that
// reads such a parameter, the node gets
//   - `offload_fetch = ["p", ...]`: the offloaded parameters it reads,
//     fetched from their tier to the device before it runs and dropped
//     after it (each use fetches anew: a whole tensor lives only around its
//     use);
//   - `offload_writeback = ["p", ...]`: those it updates (an optimizer
//     step), written back to their tier, as the step's version, after it;
//   - on the node before it that fetches too (the previous use; for the
//     first use, the node just before it), `offload_prefetch = [...]`: the
//     runtime starts this use's fetches in the background when that node
//     starts, one use ahead (double buffering).
// The lists are in operand order. The pass recomputes the three lists from
// the placements, so running it twice changes nothing. Assumes a verified
// per-rank program; a `placement` other than device, host or nvme is an
// error naming the parameter.
//
//===----------------------------------------------------------------------===//

#include "passes/Passes.h"

#include "ir/Graph.h"
#include "ir/OpRegistry.h"

#include "llvm/ADT/SetVector.h"

using namespace autopar;
using namespace llvm;

namespace {

class OffloadPass : public Pass {
public:
  StringRef getArgument() const override { return "offload"; }
  LogicalResult run(Module &M, DiagnosticEngine &Diag) override;

private:
  LogicalResult runOnGraph(Graph &G, DiagnosticEngine &Diag);
};

} // namespace

static Attribute getNameList(ArrayRef<const Value *> Values) {
  std::vector<Attribute> Names;
  for (const Value *V : Values)
    Names.push_back(Attribute::getString(V->getName()));
  return Attribute::getList(std::move(Names));
}

LogicalResult OffloadPass::runOnGraph(Graph &G, DiagnosticEngine &Diag) {
  DenseSet<const Value *> Offloaded;
  bool Failed = false;
  for (const std::unique_ptr<Value> &P : G.getParams()) {
    const Attribute *A = P->getAttrs().get("placement");
    if (!A)
      continue;
    StringRef Where = A->getString();
    if (Where == "host" || Where == "nvme")
      Offloaded.insert(P.get());
    else if (Where != "device") {
      Diag.error(P->getLoc(), "offload: parameter '%" + P->getName() +
                                  "' has placement \"" + Where +
                                  "\"; it must be device, host or nvme");
      Failed = true;
    }
  }
  if (Failed)
    return failure();

  Node *Previous = nullptr, *Before = nullptr;
  for (Node &N : G.getNodes()) {
    for (StringRef Name :
         {"offload_fetch", "offload_writeback", "offload_prefetch"})
      N.getAttrs().erase(Name);
  }
  for (Node &N : G.getNodes()) {
    SetVector<const Value *> Fetch, Writeback;
    for (Value *V : N.getOperands())
      if (V && Offloaded.count(V))
        Fetch.insert(V);
    Node *Ahead = Previous ? Previous : Before;
    Before = &N;
    if (Fetch.empty())
      continue;
    for (unsigned R = 0; R != N.getNumResults(); ++R)
      if (std::optional<unsigned> Op = getUpdatedOperand(N.getOp(), R))
        if (Offloaded.count(N.getOperand(*Op)))
          Writeback.insert(N.getOperand(*Op));
    N.getAttrs().set("offload_fetch", getNameList(Fetch.getArrayRef()));
    if (!Writeback.empty())
      N.getAttrs().set("offload_writeback",
                       getNameList(Writeback.getArrayRef()));
    // One use ahead: the previous fetching node, or for the first use the
    // node just before it.
    if (Ahead)
      Ahead->getAttrs().set("offload_prefetch",
                            getNameList(Fetch.getArrayRef()));
    Previous = &N;
  }
  return success();
}

LogicalResult OffloadPass::run(Module &M, DiagnosticEngine &Diag) {
  for (const std::unique_ptr<Graph> &G : M.getGraphs())
    if (failed(runOnGraph(*G, Diag)))
      return failure();
  return success();
}

std::unique_ptr<Pass> autopar::createOffloadPass() {
  return std::make_unique<OffloadPass>();
}
