//===- ExtractStage.cpp - One pipeline stage of a planned graph -----------===//
//
// `extract-stage{stage=S}` rebuilds a planned graph (nodes annotated with
// their `stage`, stage boundaries as SendRecv nodes: insert-collectives) as
// the forward graph of pipeline stage S alone, the graph a stage's training
// program is lowered from:
//   - nodes annotated `stage = S` are kept, with the nodes without a stage
//     (constants, weight transposes, cached masks: they read no activation)
//     that they need, cloned into each stage that needs them;
//   - a SendRecv into S becomes a graph input of its result's name and type
//     (the activation received), after the graph's own inputs;
//   - a SendRecv out of S makes its operand a graph output (the activation
//     sent); the last stage keeps the graph's outputs instead;
//   - the graph's first input (the token ids) stays on the first stage and
//     on the last, whose loss needs the labels; other inputs stay where they
//     are used; parameters stay where they are used, with their annotations
//     and data.
// A kept node that reads a value of another stage without a transfer is an
// error naming both. Assumes vpp = 1 (one chunk per stage).
//
//===----------------------------------------------------------------------===//

#include "passes/Passes.h"

#include "ir/Diagnostics.h"
#include "ir/Graph.h"

#include "llvm/ADT/DenseMap.h"
#include "llvm/ADT/SmallPtrSet.h"

using namespace autopar;
using namespace llvm;

namespace {

struct ExtractStageOptions {
  int64_t Stage = 0;

  Error validate() const {
    if (Stage < 0)
      return createStringError(inconvertibleErrorCode(),
                               "extract-stage: stage must be >= 0");
    return Error::success();
  }
};

class ExtractStagePass : public Pass {
public:
  ExtractStagePass() {
    Options.bind("stage", &Opts.Stage, "The pipeline stage to keep");
  }

  StringRef getArgument() const override { return "extract-stage"; }
  Error validateOptions() override { return Opts.validate(); }

  LogicalResult run(Module &M, DiagnosticEngine &Diag) override {
    for (size_t I = 0; I != M.getGraphs().size(); ++I) {
      Expected<std::unique_ptr<Graph>> New = extract(*M.getGraphs()[I]);
      if (!New) {
        Diag.error(M.getGraphs()[I]->getLoc(),
                   "extract-stage: graph @" + M.getGraphs()[I]->getName() +
                       ": " + toString(New.takeError()));
        return failure();
      }
      M.replaceGraph(I, std::move(*New));
    }
    return success();
  }

private:
  Expected<std::unique_ptr<Graph>> extract(const Graph &G);

  ExtractStageOptions Opts;
};

} // namespace

static std::optional<int64_t> getIntAttr(const Node &N, StringRef Name) {
  if (const Attribute *A = N.getAttrs().get(Name))
    if (A->isa(Attribute::Kind::Int))
      return A->getInt();
  return std::nullopt;
}

Expected<std::unique_ptr<Graph>> ExtractStagePass::extract(const Graph &G) {
  auto Fail = [](const Twine &Why) {
    return createStringError(inconvertibleErrorCode(), Why);
  };
  int64_t S = Opts.Stage, Last = 0;
  for (const Node &N : G.getNodes())
    if (std::optional<int64_t> St = getIntAttr(N, "stage"))
      Last = std::max(Last, *St);
  if (S > Last)
    return Fail("has stages 0.." + Twine(Last) + ", not " + Twine(S));

  // What stays: stage S's nodes, then (walking backwards) the stage-less
  // nodes they need.
  SmallPtrSet<const Node *, 32> Keep;
  SmallVector<const Node *, 4> Incoming, Outgoing;
  for (const Node &N : G.getNodes()) {
    if (N.getOp() == OpId::SendRecv) {
      if (getIntAttr(N, "dst_stage") == S)
        Incoming.push_back(&N);
      if (getIntAttr(N, "src_stage") == S)
        Outgoing.push_back(&N);
      continue;
    }
    if (getIntAttr(N, "stage") == S)
      Keep.insert(&N);
  }
  SmallPtrSet<const Value *, 32> Needed;
  if (S == Last)
    for (const Value *V : G.getOutputs())
      Needed.insert(V);
  for (const Node *N : Outgoing)
    Needed.insert(N->getOperand(0));
  SmallVector<const Node *, 256> All;
  for (const Node &N : G.getNodes())
    All.push_back(&N);
  for (const Node *N : reverse(All)) {
    bool Kept = Keep.count(N);
    if (!Kept && !getIntAttr(*N, "stage") && N->getOp() != OpId::SendRecv)
      for (const Value *R : N->getResults())
        if (Needed.count(R)) {
          Keep.insert(N);
          Kept = true;
          break;
        }
    if (Kept)
      for (const Value *V : N->getOperands())
        if (V)
          Needed.insert(V);
  }

  auto New = std::make_unique<Graph>(G.getName());
  New->setLoc(G.getLoc());
  for (const Mesh &M : G.getMeshes())
    New->addMesh(M);
  DenseMap<const Value *, Value *> Map;
  for (const std::unique_ptr<Value> &In : G.getInputs()) {
    bool First = In.get() == G.getInputs().front().get();
    if (!Needed.count(In.get()) && !(First && (S == 0 || S == Last)))
      continue;
    Value *V = New->addInput(In->getName(), In->getType());
    V->getAttrs() = In->getAttrs();
    Map[In.get()] = V;
  }
  for (const Node *N : Incoming) {
    const Value *R = N->getResult(0);
    Value *V = New->addInput(R->getName(), R->getType());
    Map[R] = V;
  }
  for (const std::unique_ptr<Value> &P : G.getParams()) {
    if (!Needed.count(P.get()))
      continue;
    Value *V = New->addParam(P->getName(), P->getType(), P->getWeightSource());
    V->getAttrs() = P->getAttrs();
    Map[P.get()] = V;
  }
  for (const Node *N : All) {
    if (!Keep.count(N))
      continue;
    SmallVector<Value *, 6> Operands;
    for (const Value *V : N->getOperands()) {
      if (!V) {
        Operands.push_back(nullptr);
        continue;
      }
      Value *M = Map.lookup(V);
      if (!M) {
        const Node *From = V->getDefiningNode();
        return Fail("node '" + N->getName() + "' of stage " + Twine(S) +
                    " reads %" + V->getName() +
                    (From && getIntAttr(*From, "stage")
                         ? " of stage " + Twine(*getIntAttr(*From, "stage"))
                         : Twine("")) +
                    " without a transfer (SendRecv) between them");
      }
      Operands.push_back(M);
    }
    SmallVector<TensorType, 3> Types;
    SmallVector<std::string, 3> Names;
    for (const Value *R : N->getResults()) {
      Types.push_back(R->getType());
      Names.push_back(R->getName().str());
    }
    Node *C =
        New->createNode(N->getOp(), Operands, Types, N->getAttrs(), Names);
    C->setName(N->getName());
    C->setLoc(N->getLoc());
    for (unsigned I = 0; I != C->getNumResults(); ++I)
      Map[N->getResult(I)] = C->getResult(I);
  }
  SmallVector<Value *, 4> Outputs;
  if (S == Last)
    for (const Value *V : G.getOutputs())
      Outputs.push_back(Map.lookup(V));
  for (const Node *N : Outgoing)
    Outputs.push_back(Map.lookup(N->getOperand(0)));
  if (Outputs.empty() || is_contained(Outputs, nullptr))
    return Fail("stage " + Twine(S) + " has nothing to send or output");
  New->setOutputs(Outputs);
  return Expected<std::unique_ptr<Graph>>(std::move(New));
}

std::unique_ptr<Pass> autopar::createExtractStagePass() {
  return std::make_unique<ExtractStagePass>();
}
