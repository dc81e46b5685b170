//===- AccumulateMicroBatches.cpp - A step over several micro-batches -----===//
//
// `accumulate-micro-batches{micro-batches=M}` turns a training graph for one
// micro-batch (after `autodiff`: outputs `loss`, `grad.<param>`, then the
// forward outputs) into the rank's whole step: the token input [b, s]
// becomes [M * b, s]; the forward and backward run M times in order, on
// rows [k b, (k + 1) b) of it; the losses and each parameter's gradients are
// summed in micro-batch order. Outputs: `loss`, then `grad.<param>` (the
// forward outputs are dropped). The graph is cloned node by node; clones
// carry `.mb<k>` names and the nodes' annotations. Autodiff's `loss-tokens`
// should be the token count of the global batch, so that the sum is the
// global mean. M = 1 leaves the graph as it is. Assumes static shapes and
// one integer input (the tokens) besides parameters and f32[] inputs named
// `optimizer.<name>` (autodiff{loss-scale=1}'s), which every micro-batch
// reads.
//
//===----------------------------------------------------------------------===//

#include "passes/GradientRules.h"
#include "passes/Passes.h"

#include "ir/Diagnostics.h"

#include "llvm/ADT/DenseMap.h"

using namespace autopar;
using namespace llvm;

namespace {

struct AccumulateOptions {
  /// Micro-batches per step on this rank.
  int64_t MicroBatches = 1;

  Error validate() const {
    if (MicroBatches < 1)
      return createStringError(inconvertibleErrorCode(),
                               "accumulate-micro-batches: micro-batches must "
                               "be 1 or more");
    return Error::success();
  }
};

class AccumulateMicroBatchesPass : public Pass {
public:
  AccumulateMicroBatchesPass() {
    Options.bind("micro-batches", &Opts.MicroBatches,
                 "Micro-batches per step on this rank");
  }

  StringRef getArgument() const override { return "accumulate-micro-batches"; }
  Error validateOptions() override { return Opts.validate(); }

  LogicalResult run(Module &M, DiagnosticEngine &Diag) override {
    if (Opts.MicroBatches == 1)
      return success();
    for (const std::unique_ptr<Graph> &G : M.getGraphs())
      if (Error E = runOnGraph(*G)) {
        Diag.error(G->getLoc(), "accumulate-micro-batches: graph @" +
                                    G->getName() + ": " +
                                    toString(std::move(E)));
        return failure();
      }
    return success();
  }

private:
  Error runOnGraph(Graph &G);

  AccumulateOptions Opts;
};

} // namespace

Error AccumulateMicroBatchesPass::runOnGraph(Graph &G) {
  auto Fail = [](const Twine &Why) {
    return createStringError(inconvertibleErrorCode(), Why);
  };
  // The tokens; optimizer scalars (the loss scale) are shared.
  SmallVector<Value *, 2> Data;
  for (const std::unique_ptr<Value> &In : G.getInputs())
    if (!In->getName().startswith("optimizer."))
      Data.push_back(In.get());
  if (Data.size() != 1)
    return Fail("needs exactly one input (the tokens), has " +
                Twine(Data.size()));
  Value *Tokens = Data.front();
  const TensorType TT = Tokens->getType();
  if (isFloatElementType(TT.getElementType()) || TT.getRank() < 1 ||
      !TT.hasStaticShape())
    return Fail("the input %" + Tokens->getName() +
                " must be static integer tokens, got " + TT.str());
  ArrayRef<Value *> Outs = G.getOutputs();
  if (Outs.empty() || Outs.front()->getName() != "loss")
    return Fail("the first output must be the loss; run autodiff first");
  SmallVector<Value *, 32> Grads;
  for (Value *Out : Outs.drop_front())
    if (Out->getName().startswith("grad."))
      Grads.push_back(Out);

  // The per-micro-batch nodes, before anything is added.
  SmallVector<Node *, 128> Body;
  for (Node &N : G.getNodes())
    Body.push_back(&N);

  // The token input grows to the whole step; each clone reads its rows.
  SmallVector<int64_t, 4> Sizes = TT.getStaticSizes();
  int64_t Rows = Sizes[0];
  Sizes[0] *= Opts.MicroBatches;
  Value *All = Tokens;
  All->setType(TensorType::get(TT.getElementType(), Sizes));

  GradBuilder B(G);
  Value *Loss = nullptr;
  SmallVector<Value *, 32> Sums(Grads.size(), nullptr);
  DenseMap<Value *, Value *> Shared;
  for (int64_t K = 0; K != Opts.MicroBatches; ++K) {
    B.setForwardNode(nullptr);
    Expected<Value *> Slice =
        B.emit1(OpId::Slice, {All, B.ints({K * Rows}), B.ints({(K + 1) * Rows}),
                              B.ints({0})});
    if (!Slice)
      return Slice.takeError();
    DenseMap<Value *, Value *> Map;
    Map[Tokens] = *Slice;
    std::string Suffix = ".mb" + std::to_string(K);
    // Constants are shared by the clones and keep their node names.
    for (Node *N : Body)
      cloneForMicroBatch(G, N, Map, Suffix,
                         N->getOp() == OpId::Constant ? "" : Suffix, Shared, K,
                         Opts.MicroBatches);
    Value *L = Map.lookup(Outs.front());
    if (!Loss) {
      Loss = L;
    } else {
      Expected<Value *> S = B.add(Loss, L);
      if (!S)
        return S.takeError();
      Loss = *S;
    }
    for (unsigned I = 0; I != Grads.size(); ++I)
      if (Error E = addToRunningSum(B, Sums[I], Map.lookup(Grads[I])))
        return E;
  }
  // The single-micro-batch body is dead now; the sums take the outputs'
  // names.
  replaceStepOutputs(G, Body, Loss, Grads, Sums);
  return Error::success();
}

std::unique_ptr<Pass> autopar::createAccumulateMicroBatchesPass() {
  return std::make_unique<AccumulateMicroBatchesPass>();
}
