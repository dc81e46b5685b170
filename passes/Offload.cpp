//===- Offload.cpp - Say when offloaded state moves -----------------------===//
//
// `offload` makes the moves of offloaded tensors explicit in a training
// program (docs/Offload.md). It runs after insert-optimizer, which placed
// the moments (`states=host|nvme`) and with ZeRO-3 the parameters
// (`params=host|nvme`) with the `placement` annotation. The gradients of an
// optimizer step whose state is offloaded are offloaded to the same tier
// (ZeRO-Offload keeps them with the optimizer, as cost/ModelState.cpp
// prices it): the step's gradient operand and the sums over micro-batches
// that build it. For every node
//   - `offload_fetch = ["p", ...]`: the offloaded parameters and gradients
//     it reads, fetched from their tier to the device before it runs and
//     dropped after it (each use fetches anew: a whole tensor lives only
//     around its use);
//   - `offload_writeback = ["p", ...]`: the parameters it updates (an
//     optimizer step), written back to their tier, as the step's version,
//     after it;
//   - `offload_evict = ["g", ...]` and `offload_tier`: the gradients it
//     computes, written to that tier and freed after it (a gradient whose
//     only user runs right after it stays on the device);
//   - on the node before it that fetches too (the previous use; for the
//     first use, the node just before it), `offload_prefetch = [...]`: the
//     runtime starts this use's fetches in the background when that node
//     starts, one use ahead (double buffering); a gradient computed by
//     that node or later is fetched when needed.
// The lists are in operand order. The pass recomputes them from the
// placements, so running it twice changes nothing. Assumes a verified
// per-rank program; a `placement` other than device, host or nvme is an
// error naming the parameter.
//
//===----------------------------------------------------------------------===//

#include "passes/Passes.h"

#include "ir/Graph.h"
#include "ir/OpRegistry.h"

#include "llvm/ADT/STLExtras.h"
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

  for (Node &N : G.getNodes())
    for (StringRef Name : {"offload_fetch", "offload_writeback",
                           "offload_prefetch", "offload_evict", "offload_tier"})
      N.getAttrs().erase(Name);

  // Gradients of steps whose state is offloaded, with their tier.
  DenseMap<const Value *, StringRef> GradTier;
  for (Node &N : G.getNodes()) {
    if (N.getOp() != OpId::AdamW && N.getOp() != OpId::Sgd)
      continue;
    StringRef Tier;
    for (unsigned I = 2; I < N.getNumOperands(); ++I)
      if (Value *V = N.getOperand(I); V && Offloaded.count(V))
        Tier = V->getAttrs().get("placement")->getString();
    if (Tier.empty())
      continue;
    for (const Value *V : getStepGradientTerms(N))
      if (V->getDefiningNode())
        GradTier.try_emplace(V, Tier);
  }
  DenseMap<const Node *, unsigned> Index;
  for (Node &N : G.getNodes())
    Index[&N] = Index.size();
  // A gradient whose users are all the node right after its producer stays.
  DenseSet<const Value *> Evicted;
  for (auto [V, Tier] : GradTier) {
    unsigned At = Index.lookup(V->getDefiningNode());
    if (any_of(V->getUsers(),
               [&](const Node *U) { return Index.lookup(U) != At + 1; }))
      Evicted.insert(V);
  }

  Node *Previous = nullptr, *Before = nullptr;
  for (Node &N : G.getNodes()) {
    SetVector<const Value *> Fetch, Writeback, Evict;
    for (Value *V : N.getOperands())
      if (V && (Offloaded.count(V) || Evicted.count(V)))
        Fetch.insert(V);
    StringRef Tier;
    for (unsigned R = 0; R != N.getNumResults(); ++R) {
      if (Evicted.count(N.getResult(R))) {
        Evict.insert(N.getResult(R));
        Tier = GradTier.lookup(N.getResult(R));
      }
      if (std::optional<unsigned> Op = getUpdatedOperand(N.getOp(), R))
        if (Offloaded.count(N.getOperand(*Op)))
          Writeback.insert(N.getOperand(*Op));
    }
    if (!Evict.empty()) {
      N.getAttrs().set("offload_evict", getNameList(Evict.getArrayRef()));
      N.getAttrs().set("offload_tier", Attribute::getString(Tier));
    }
    Node *AheadNode = Previous ? Previous : Before;
    Before = &N;
    if (Fetch.empty())
      continue;
    N.getAttrs().set("offload_fetch", getNameList(Fetch.getArrayRef()));
    if (!Writeback.empty())
      N.getAttrs().set("offload_writeback",
                       getNameList(Writeback.getArrayRef()));
    // One use ahead: the previous fetching node, or for the first use the
    // node just before it; gradients only once they are written.
    SmallVector<const Value *, 8> Ahead;
    if (AheadNode)
      for (const Value *V : Fetch)
        if (V->isParam() ||
            Index.lookup(V->getDefiningNode()) < Index.lookup(AheadNode))
          Ahead.push_back(V);
    if (!Ahead.empty())
      AheadNode->getAttrs().set("offload_prefetch", getNameList(Ahead));
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
