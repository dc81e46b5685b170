//===- TestPasses.cpp - Passes that exist only for tests ------------------===//
//
// These passes exercise the pass manager's failure paths from lit tests:
//   test-fail       reports an error and fails;
//   test-break-ir   returns success but leaves a node whose declared result
//                   type its shape function rejects, so verification after
//                   the pass must catch it.
// test-print-layer-stats (TestPrintLayerStats.cpp) prints per-layer counts.
//
//===----------------------------------------------------------------------===//

#include "test/lib/TestPasses.h"

#include "ir/Graph.h"
#include "passes/PassRegistry.h"

using namespace autopar;
using namespace llvm;

namespace {

class TestFailPass : public Pass {
public:
  TestFailPass() {
    Options.bind("message", &Message, "Text of the error to report");
  }
  StringRef getArgument() const override { return "test-fail"; }
  LogicalResult run(Module &, DiagnosticEngine &Diag) override {
    Diag.error(SMLoc(), Message);
    return failure();
  }

private:
  std::string Message = "test-fail was asked to fail";
};

class TestBreakIRPass : public Pass {
public:
  StringRef getArgument() const override { return "test-break-ir"; }
  LogicalResult run(Module &M, DiagnosticEngine &) override {
    for (const std::unique_ptr<Graph> &G : M.getGraphs())
      for (Node &N : G->getNodes())
        if (N.getNumResults() != 0) {
          Value *R = N.getResult(0);
          ArrayRef<Dim> Old = R->getType().getShape();
          SmallVector<Dim, 4> Shape(Old.begin(), Old.end());
          Shape.push_back(Dim::get(7));
          R->setType(TensorType(R->getType().getElementType(), Shape));
          return success();
        }
    return success();
  }
};

} // namespace

void autopar::registerTestPasses() {
  registerPass("test-fail", "Fail with an error (tests the pass manager)",
               [] { return std::make_unique<TestFailPass>(); });
  registerPass("test-break-ir",
               "Add a dimension to the first result type (tests verification "
               "after each pass)",
               [] { return std::make_unique<TestBreakIRPass>(); });
  registerTestPrintLayerStatsPass();
  registerTestPrintOpLoopsPass();
  registerTestPrintCostPass();
}
