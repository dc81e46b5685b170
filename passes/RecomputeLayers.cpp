//===- RecomputeLayers.cpp - Full activation recomputation ----------------===//
//
// `recompute{first=A last=B}` lowers full activation recomputation
// (Korthikanti et al. 2022; Megatron-LM's --recompute-granularity full
// --recompute-method uniform --recompute-num-layers 1) in a training graph
// after autodiff: for every layer L in [A, B] (the `layer` annotation of
// detect-layers; B < 0: no upper bound), the backward no longer reads the
// values the forward of L computed. Just before the first backward node
// that reads one of them, the forward nodes of L that compute them (and the
// nodes of L they need) run again as clones (`<name>.recompute`), and every
// backward read goes to the clone. What L's forward hands to other layers
// (its output: the next layer's input) and what it reads (its input) are
// kept as they are; everything else of L lives only during the forward, and
// its clone only during L's backward, so the runtime (which frees a value
// after its last reader) holds each layer's input plus one layer's
// activations instead of every layer's. The clones compute exactly what the
// originals did (the same kernels on the same inputs; a training-mode
// dropout's clone keeps its `rng_stream` and so draws the same mask), so
// the losses are bit for bit those of the graph without recomputation.
//
// The forward is what the graph's non-gradient outputs (`loss`, the values
// sent to the next pipeline stage) need; the rest is the backward.
// Constants are not cloned. Run before accumulate-micro-batches or
// schedule-pipeline, which copy each micro-batch's forward and backward
// (clones included). The planner prices the same choice (planner/Search.cpp:
// every unit but the first and the last, when there are more than two);
// passes/PlanPipelines.cpp passes those layers.
//
//===----------------------------------------------------------------------===//

#include "passes/GradientRules.h"
#include "passes/Passes.h"

#include "ir/Diagnostics.h"
#include "ir/Graph.h"

#include "llvm/ADT/DenseMap.h"
#include "llvm/ADT/MapVector.h"
#include "llvm/ADT/SmallPtrSet.h"

#include <map>

using namespace autopar;
using namespace llvm;

namespace {

class RecomputeLayersPass : public GraphPass {
public:
  RecomputeLayersPass() {
    Options.bind("first", &First, "First layer to recompute");
    Options.bind("last", &Last, "Last layer to recompute (< 0: every one)");
  }
  StringRef getArgument() const override { return "recompute"; }

private:
  void runOnGraph(Graph &G) override;
  void recomputeLayer(Graph &G, ArrayRef<Node *> Layer,
                      const SmallPtrSetImpl<const Node *> &Forward,
                      const DenseMap<const Node *, unsigned> &Order) const;

  int64_t First = 0, Last = -1;
};

std::optional<int64_t> layerOf(const Node &N) {
  if (const Attribute *A = N.getAttr("layer"))
    if (A->isa(Attribute::Kind::Int))
      return A->getInt();
  return std::nullopt;
}

} // namespace

void RecomputeLayersPass::runOnGraph(Graph &G) {
  // The forward: what the non-gradient outputs need.
  SmallPtrSet<const Node *, 32> Forward = getForwardNodes(G);
  DenseMap<const Node *, unsigned> Order;
  std::map<int64_t, SmallVector<Node *, 32>> Layers;
  unsigned Position = 0;
  for (Node &N : G.getNodes()) {
    Order[&N] = Position++;
    std::optional<int64_t> L = layerOf(N);
    if (Forward.count(&N) && L && *L >= First && (Last < 0 || *L <= Last) &&
        N.getOp() != OpId::Constant)
      Layers[*L].push_back(&N);
  }
  for (auto &[L, Nodes] : Layers)
    recomputeLayer(G, Nodes, Forward, Order);
}

void RecomputeLayersPass::recomputeLayer(
    Graph &G, ArrayRef<Node *> Layer,
    const SmallPtrSetImpl<const Node *> &Forward,
    const DenseMap<const Node *, unsigned> &Order) const {
  SmallPtrSet<const Node *, 32> InLayer(Layer.begin(), Layer.end());
  // The values of the layer the backward reads, except those the forward of
  // other layers reads too (the layer's output, kept as the next input).
  MapVector<Value *, SmallVector<Node *, 4>> Saved;
  Node *FirstReader = nullptr;
  for (Node *N : Layer)
    for (Value *R : N->getResults()) {
      if (!R)
        continue;
      bool Boundary = llvm::any_of(R->getUsers(), [&](const Node *U) {
        return Forward.count(U) && !InLayer.count(U);
      });
      if (Boundary || llvm::is_contained(G.getOutputs(), R))
        continue;
      for (Node *U : R->getUsers()) {
        if (Forward.count(U))
          continue;
        Saved[R].push_back(U);
        if (!FirstReader || Order.lookup(U) < Order.lookup(FirstReader))
          FirstReader = U;
      }
    }
  if (Saved.empty())
    return;
  // The nodes of the layer that compute them, with those they need.
  SmallPtrSet<const Node *, 32> Needed;
  SmallVector<const Node *, 16> Work;
  for (auto &Entry : Saved)
    Work.push_back(Entry.first->getDefiningNode());
  while (!Work.empty()) {
    const Node *N = Work.pop_back_val();
    if (!N || !InLayer.count(N) || !Needed.insert(N).second)
      continue;
    for (const Value *O : N->getOperands())
      if (O)
        Work.push_back(O->getDefiningNode());
  }
  // Clones in the original order, just before the first backward reader.
  DenseMap<Value *, Value *> Clone;
  for (Node *N : Layer) {
    if (!Needed.count(N))
      continue;
    SmallVector<Value *, 4> Operands;
    for (Value *O : N->getOperands())
      Operands.push_back(O && Clone.count(O) ? Clone[O] : O);
    SmallVector<TensorType, 2> Types;
    SmallVector<std::string, 2> Names;
    for (Value *R : N->getResults()) {
      Types.push_back(R->getType());
      Names.push_back(G.getUniqueName((R->getName() + ".recompute").str()));
    }
    Node *C = G.createNode(N->getOp(), Operands, Types, N->getAttrs(), Names,
                           FirstReader);
    if (!N->getName().empty())
      C->setName((N->getName() + ".recompute").str());
    for (unsigned I = 0; I != N->getNumResults(); ++I)
      Clone[N->getResult(I)] = C->getResult(I);
  }
  for (auto &[V, Readers] : Saved)
    for (Node *U : Readers)
      for (unsigned I = 0; I != U->getNumOperands(); ++I)
        if (U->getOperand(I) == V)
          U->setOperand(I, Clone[V]);
}

std::unique_ptr<Pass> autopar::createRecomputeLayersPass() {
  return std::make_unique<RecomputeLayersPass>();
}
