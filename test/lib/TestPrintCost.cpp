//===- TestPrintCost.cpp - Print each node's cost under its layout --------===//
//
// test-print-cost prints, for each node that reads an activation, the
// strategy its sharding annotation records and its cost on one rank
// (cost/OpCost.h) for the device `gpu`:
//   %y = Linear split=loop 2 of 8: fwd=1.2e-03s bwd=2.4e-03s flops=...
//   saved=...
// and, when nodes carry `stage` annotations, one line per stage:
//   stage 0: nodes=N params=P frozen=F bytes activations=A bytes
// (on one rank: the elements of the trained parameters the stage holds,
// the bytes of its frozen ones at their own element types,
// cost/HeldParams.h, and the bytes kept for backward for one micro-batch,
// no recomputation). The split degree is the size of `axis` in the
// annotation's mesh. The graph is not changed; shapes must be static.
//
//===----------------------------------------------------------------------===//

#include "test/lib/TestPasses.h"

#include "cost/ActivationMemory.h"
#include "cost/Cluster.h"
#include "cost/HeldParams.h"
#include "cost/OpCost.h"
#include "ir/Graph.h"
#include "ir/OpLoops.h"
#include "passes/PassRegistry.h"
#include "passes/ShardGraph.h"

#include "llvm/ADT/DenseMap.h"
#include "llvm/Support/Format.h"
#include "llvm/Support/raw_ostream.h"

#include <map>

using namespace autopar;
using namespace llvm;

namespace {

class TestPrintCostPass : public Pass {
public:
  TestPrintCostPass() {
    Options.bind("gpu", &Gpu, "Device of the cost model");
    Options.bind("axis", &Axis, "Mesh axis of the tensor-parallel group");
  }
  StringRef getArgument() const override { return "test-print-cost"; }

  Error validateOptions() override {
    if (!lookupDevice(Gpu))
      return createStringError(inconvertibleErrorCode(),
                               "unknown gpu '" + Gpu + "'");
    return Error::success();
  }

  LogicalResult run(Module &M, DiagnosticEngine &Diag) override {
    for (const std::unique_ptr<Graph> &G : M.getGraphs())
      if (failed(print(*G, Diag, outs())))
        return failure();
    return success();
  }

private:
  LogicalResult print(const Graph &G, DiagnosticEngine &Diag, raw_ostream &OS);
  LoopSplit splitOf(const Node &N, const std::optional<OpLoops> &L) const;

  std::string Gpu = "a100-80gb";
  std::string Axis = "tp";
};

LoopSplit TestPrintCostPass::splitOf(const Node &N,
                                     const std::optional<OpLoops> &L) const {
  return getAnnotatedSplit(N, L, Axis);
}

LogicalResult TestPrintCostPass::print(const Graph &G, DiagnosticEngine &Diag,
                                       raw_ostream &OS) {
  for (const Node &N : G.getNodes())
    for (unsigned R = 0, E = N.getNumResults(); R != E; ++R)
      if (N.getResult(R) && !N.getResult(R)->getType().hasStaticShape()) {
        Diag.error(N, "test-print-cost needs static shapes");
        return failure();
      }
  const DeviceSpec &Device = *lookupDevice(Gpu);
  GradientFlow Flow(G);
  CostSettings Settings;
  OS << "cost @" << G.getName() << " on " << Device.Name << '\n';
  std::map<int64_t, std::vector<const Node *>> Stages;
  for (const Node &N : G.getNodes()) {
    if (none_of(N.getOperands(),
                [&](const Value *O) { return Flow.isActivation(O); }))
      continue;
    std::optional<OpLoops> L = getOpLoops(N);
    printShardedNodeCost(
        OS, N, getShardedNodeCost(N, L, splitOf(N, L), Device, Settings, Flow));
    if (const Attribute *S = N.getAttr("stage"))
      if (S->isa(Attribute::Kind::Int))
        Stages[S->getInt()].push_back(&N);
  }
  for (const auto &[Stage, Nodes] : Stages) {
    auto SplitOf = [&, &Nodes = Nodes](unsigned K) {
      return splitOf(*Nodes[K], getOpLoops(*Nodes[K]));
    };
    double Params = sumElements(getHeldParams(Nodes, SplitOf, Flow));
    double Frozen = getFrozenParamBytes(Nodes, SplitOf, Flow);
    double Activations = savedActivationBytes(
        Nodes, [&](const Node &N) { return splitOf(N, getOpLoops(N)); },
        Recompute::None, Flow, Settings);
    OS << "stage " << Stage << ": nodes=" << Nodes.size()
       << format(" params=%.4g frozen=%.4g bytes activations=%.4g bytes\n",
                 Params, Frozen, Activations);
  }
  return success();
}

} // namespace

void autopar::registerTestPrintCostPass() {
  registerPass("test-print-cost",
               "Print each node's cost under its sharding and each stage's "
               "memory (tests)",
               [] { return std::make_unique<TestPrintCostPass>(); });
}
