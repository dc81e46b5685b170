//===- TestPrintOpLoops.cpp - Print each node's loops (ir/OpLoops.h) ------===//
//
// test-print-op-loops prints, for each node of each graph, one line:
//   RESULT = OP loops(P R F ...) OPERAND[l l -] ... -> RESULT[l l] split=...
// where the loop kinds are P(arallel), R(eduction), F(ixed), each operand and
// result lists the loop of every dimension (`-` for none, `_` for an absent
// operand), and `split=` lists the loops that can be split `degree` ways.
// Nodes without a rule print `no loops`. The graph is not changed.
//
//===----------------------------------------------------------------------===//

#include "test/lib/TestPasses.h"

#include "ir/Graph.h"
#include "ir/OpLoops.h"
#include "passes/PassRegistry.h"

#include "llvm/Support/raw_ostream.h"

using namespace autopar;
using namespace llvm;

namespace {

void printMap(raw_ostream &OS, ArrayRef<int> Map) {
  OS << '[';
  for (unsigned I = 0; I != Map.size(); ++I) {
    if (I)
      OS << ' ';
    if (Map[I] == OpLoops::NoLoop)
      OS << '-';
    else
      OS << Map[I];
  }
  OS << ']';
}

class TestPrintOpLoopsPass : public Pass {
public:
  TestPrintOpLoopsPass() {
    Options.bind("degree", &Degree, "Split degree to test each loop with");
  }

  StringRef getArgument() const override { return "test-print-op-loops"; }

  Error validateOptions() override {
    if (Degree < 1)
      return createStringError(inconvertibleErrorCode(),
                               "degree must be at least 1");
    return Error::success();
  }

  LogicalResult run(Module &M, DiagnosticEngine &) override {
    for (const std::unique_ptr<Graph> &G : M.getGraphs())
      for (const Node &N : G->getNodes())
        print(N, outs());
    return success();
  }

private:
  void print(const Node &N, raw_ostream &OS) {
    OS << (N.getNumResults() ? "%" + N.getResult(0)->getName().str()
                             : std::string("(none)"))
       << " = " << N.getOpName();
    std::optional<OpLoops> L = getOpLoops(N);
    if (!L) {
      OS << " no loops\n";
      return;
    }
    OS << " loops(";
    for (unsigned I = 0; I != L->getNumLoops(); ++I) {
      if (I)
        OS << ' ';
      OS << "PRF"[unsigned(L->Kinds[I])];
      if (L->Granules[I])
        OS << '/' << L->Granules[I];
    }
    OS << ')';
    for (unsigned I = 0; I != N.getNumOperands(); ++I) {
      OS << ' ';
      if (!N.getOperand(I))
        OS << '_';
      else
        printMap(OS, L->Operands[I]);
    }
    OS << " ->";
    for (unsigned I = 0; I != N.getNumResults(); ++I) {
      OS << ' ';
      printMap(OS, L->Results[I]);
    }
    OS << " split=";
    bool Any = false;
    for (unsigned I = 0; I != L->getNumLoops(); ++I)
      if (canSplitLoop(N, *L, I, Degree)) {
        OS << (Any ? "," : "") << I;
        Any = true;
      }
    if (!Any)
      OS << "none";
    OS << '\n';
  }

  int64_t Degree = 2;
};

} // namespace

void autopar::registerTestPrintOpLoopsPass() {
  registerPass("test-print-op-loops",
               "Print each node's loops and which can be split (tests)",
               [] { return std::make_unique<TestPrintOpLoopsPass>(); });
}
