//===- CastParamsPerUse.cpp - A parameter's narrow copy per use -----------===//
//
// `cast-params-per-use` lowers what ZeRO-3 and weight offload hold of a
// mixed-precision parameter: its compute-precision copy only around each
// use (Rajbhandari et al. 2020, section 5.3; the cost model prices two
// consecutive uses' 16-bit weights, cost/ModelState.cpp). mixed-precision
// casts each fp32 parameter once, before its first reader, and autodiff's
// backward reads that copy again, so the forward's copy of every layer
// would live until the layer's backward: the whole model in 16 bits.
// Here every further reader of such a Cast gets a clone of it placed right
// before it (`<cast>.use`), so each copy dies with its reader; the gather
// of ZeRO-3 (insert-grad-sync) and the fetch of offload (offload) that
// follow then run per use too. A cast of an fp32 parameter to a narrower
// float is what the pass looks for; readers are taken in program order.
// Run after accumulate-micro-batches or schedule-pipeline (whose copies are
// per micro-batch) and before insert-grad-sync and offload, on plans with
// zero=3 or offloaded weights; the clones compute the same bits, so losses
// do not change.
//
//===----------------------------------------------------------------------===//

#include "passes/GradientRules.h"
#include "passes/Passes.h"

#include "ir/Graph.h"

#include "llvm/ADT/DenseMap.h"

using namespace autopar;
using namespace llvm;

namespace {

class CastParamsPerUsePass : public GraphPass {
public:
  StringRef getArgument() const override { return "cast-params-per-use"; }

private:
  void runOnGraph(Graph &G) override;
};

} // namespace

void CastParamsPerUsePass::runOnGraph(Graph &G) {
  DenseMap<const Node *, unsigned> Order;
  SmallVector<Node *, 32> Casts;
  for (Node &N : G.getNodes()) {
    Order[&N] = Order.size();
    if (isNarrowingParamCast(N))
      Casts.push_back(&N);
  }
  for (Node *C : Casts) {
    Value *Copy = C->getResult(0);
    if (Copy->getNumOutputUses())
      continue;
    SmallVector<Node *, 4> Readers;
    for (Node *U : Copy->getUsers())
      if (!is_contained(Readers, U))
        Readers.push_back(U);
    llvm::sort(Readers, [&](const Node *A, const Node *B) {
      return Order.lookup(A) < Order.lookup(B);
    });
    for (Node *Reader : ArrayRef<Node *>(Readers).drop_front()) {
      Node *Clone = G.createNode(
          OpId::Cast, {C->getOperand(0)}, {Copy->getType()}, C->getAttrs(),
          {G.getUniqueName((Copy->getName() + ".use").str())}, Reader);
      if (!C->getName().empty())
        Clone->setName((C->getName() + ".use").str());
      for (unsigned I = 0, E = Reader->getNumOperands(); I != E; ++I)
        if (Reader->getOperand(I) == Copy)
          Reader->setOperand(I, Clone->getResult(0));
    }
  }
}

std::unique_ptr<Pass> autopar::createCastParamsPerUsePass() {
  return std::make_unique<CastParamsPerUsePass>();
}
