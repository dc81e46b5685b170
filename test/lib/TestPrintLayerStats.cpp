//===- TestPrintLayerStats.cpp - Print per-layer node/param/FLOP counts ---===//
//
// test-print-layer-stats prints, for each graph, one line per `layer`
// annotation value in increasing order:
//   layer N: nodes=X params=Y flops=Z
// where X counts the nodes annotated `layer = N`, Y the elements of the
// parameters whose first use (in node order) is such a node (a parameter
// shared by several layers counts for the first), and Z the forward FLOPs of
// those nodes (ir/OpFlops.h). Nodes without the annotation, and unused
// parameters, go to a `layer none` line. A `total` line sums the others. A
// count that depends on a shape that is not static prints as `?`. The graph
// is not changed.
//
//===----------------------------------------------------------------------===//

#include "test/lib/TestPasses.h"

#include "ir/Graph.h"
#include "ir/OpFlops.h"
#include "passes/PassRegistry.h"

#include "llvm/ADT/DenseMap.h"
#include "llvm/Support/raw_ostream.h"

#include <map>

using namespace autopar;
using namespace llvm;

namespace {

/// Counts of one layer; nullopt once a term is unknown.
struct LayerStats {
  int64_t Nodes = 0;
  std::optional<int64_t> Params = 0;
  std::optional<int64_t> Flops = 0;

  static void add(std::optional<int64_t> &Sum, std::optional<int64_t> Term) {
    if (Sum && Term)
      *Sum += *Term;
    else
      Sum = std::nullopt;
  }
  void add(const LayerStats &O) {
    Nodes += O.Nodes;
    add(Params, O.Params);
    add(Flops, O.Flops);
  }
};

void printCount(raw_ostream &OS, const std::optional<int64_t> &V) {
  if (V)
    OS << *V;
  else
    OS << '?';
}

void printLine(raw_ostream &OS, StringRef Label, const LayerStats &S) {
  OS << Label << ": nodes=" << S.Nodes << " params=";
  printCount(OS, S.Params);
  OS << " flops=";
  printCount(OS, S.Flops);
  OS << '\n';
}

class TestPrintLayerStatsPass : public Pass {
public:
  StringRef getArgument() const override { return "test-print-layer-stats"; }

  LogicalResult run(Module &M, DiagnosticEngine &) override {
    for (const std::unique_ptr<Graph> &G : M.getGraphs())
      print(*G, outs());
    return success();
  }

private:
  /// The layer of N; -1 when it has none.
  static int64_t getLayer(const Node &N) {
    const Attribute *A = N.getAttr("layer");
    return A && A->isa(Attribute::Kind::Int) ? A->getInt() : -1;
  }

  void print(const Graph &G, raw_ostream &OS) {
    std::map<int64_t, LayerStats> Stats;
    DenseMap<const Node *, size_t> Order;
    for (const Node &N : G.getNodes()) {
      size_t Index = Order.size();
      Order[&N] = Index;
      LayerStats &S = Stats[getLayer(N)];
      ++S.Nodes;
      LayerStats::add(S.Flops, getForwardFlops(N));
    }
    for (const std::unique_ptr<Value> &P : G.getParams()) {
      const Node *First = nullptr;
      for (const Node *U : P->getUsers())
        if (!First || Order.lookup(U) < Order.lookup(First))
          First = U;
      LayerStats &S = Stats[First ? getLayer(*First) : -1];
      LayerStats::add(S.Params, P->getType().getStaticNumElements());
    }
    OS << "layer stats @" << G.getName() << '\n';
    LayerStats Total;
    for (const auto &[Layer, S] : Stats) {
      if (Layer < 0)
        printLine(OS, "layer none", S);
      else
        printLine(OS, ("layer " + Twine(Layer)).str(), S);
      Total.add(S);
    }
    printLine(OS, "total", Total);
  }
};

} // namespace

void autopar::registerTestPrintLayerStatsPass() {
  registerPass("test-print-layer-stats",
               "Print nodes, parameter elements and forward FLOPs per layer",
               [] { return std::make_unique<TestPrintLayerStatsPass>(); });
}
