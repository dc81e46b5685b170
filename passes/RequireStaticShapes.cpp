//===- RequireStaticShapes.cpp - Every shape known before planning --------===//
//
// Planning needs sizes: this pass fails, naming what is missing, when a
// value's shape still has a symbolic dimension (listing every symbol, to
// bind with `--dim NAME=SIZE`) or an unknown one (naming the first node that
// produces one). It changes nothing. The planner's pipeline runs it first;
// `import-canonical` does not, so that symbolic models stay importable.
// Assumes verified input.
//
//===----------------------------------------------------------------------===//

#include "passes/Passes.h"

#include "ir/Graph.h"

#include "llvm/ADT/STLExtras.h"
#include "llvm/ADT/StringExtras.h"

#include <set>

using namespace autopar;
using namespace llvm;

namespace {

class RequireStaticShapesPass : public Pass {
public:
  StringRef getArgument() const override { return "require-static-shapes"; }
  LogicalResult run(Module &M, DiagnosticEngine &Diag) override;
};

} // namespace

/// Adds the symbols of T to Symbols; returns true when T has an unknown
/// dimension.
static bool collect(const TensorType &T, std::set<std::string> &Symbols) {
  bool Unknown = false;
  for (const Dim &D : T.getShape()) {
    Unknown |= D.isUnknown();
    for (const std::string &S : D.getSymbols())
      Symbols.insert(S);
  }
  return Unknown;
}

LogicalResult RequireStaticShapesPass::run(Module &M, DiagnosticEngine &Diag) {
  bool Failed = false;
  for (const std::unique_ptr<Graph> &G : M.getGraphs()) {
    std::set<std::string> Symbols;
    for (const std::unique_ptr<Value> &V : G->getInputs())
      if (collect(V->getType(), Symbols)) {
        Diag.error(V->getLoc(), "graph input '%" + V->getName() +
                                    "' has a dimension of unknown size");
        Failed = true;
      }
    for (const std::unique_ptr<Value> &V : G->getParams())
      collect(V->getType(), Symbols);
    bool ReportedUnknown = false;
    for (const Node &N : G->getNodes())
      for (unsigned I = 0, E = N.getNumResults(); I != E; ++I)
        if (collect(N.getResult(I)->getType(), Symbols) && !ReportedUnknown) {
          Diag.error(N, "result '%" + N.getResult(I)->getName() + "' has " +
                            N.getResult(I)->getType().str() +
                            ": a size planning needs is not known");
          ReportedUnknown = Failed = true;
        }
    if (!Symbols.empty()) {
      Diag.error(G->getLoc(), "graph '@" + G->getName() +
                                  "' has unbound symbolic dimensions: " +
                                  join(Symbols, ", ") +
                                  "; bind each with --dim NAME=SIZE");
      Failed = true;
    }
  }
  return Failed ? failure() : success();
}

std::unique_ptr<Pass> autopar::createRequireStaticShapesPass() {
  return std::make_unique<RequireStaticShapesPass>();
}
