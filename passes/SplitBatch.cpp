//===- SplitBatch.cpp - Data parallelism as a split of the batch ----------===//
//
// split-batch makes data parallelism explicit: every graph input with a
// `batch_dim` gets a `batch_split` annotation, its batch dimension split
// over `axis` of `mesh`: each data-parallel rank reads its rows of the
// step's samples and computes on them what the graph says. insert-grad-sync
// reduces the gradients over that split, and autopar-run gives each rank
// its rows by it; no pass or runtime finds data parallelism by an axis
// name. With `from-plan`, the mesh is the plan's (@cluster, added when
// missing) and the axis its data-parallel one (PlanContext.h). Assumes the
// mesh has the axis.
//
//===----------------------------------------------------------------------===//

#include "passes/Passes.h"
#include "passes/PlanContext.h"

#include "ir/Graph.h"

using namespace autopar;
using namespace llvm;

namespace {

class SplitBatchPass : public Pass {
public:
  SplitBatchPass() {
    Options.bind("mesh", &MeshName, "Mesh of the data-parallel ranks");
    Options.bind("axis", &Axis, "Data-parallel axis of the mesh");
    Options.bind("from-plan", &FromPlan,
                 "The data-parallel axis of the module's plan");
  }
  StringRef getArgument() const override { return "split-batch"; }

  Error validateOptions() override {
    if (!FromPlan && (MeshName.empty() || Axis.empty()))
      return createStringError(inconvertibleErrorCode(),
                               "split-batch needs mesh= and axis= (or "
                               "from-plan)");
    return Error::success();
  }

  LogicalResult run(Module &M, DiagnosticEngine &Diag) override {
    std::optional<PlanContext> Plan;
    if (FromPlan) {
      Plan = readPlanContext(M, "split-batch", Diag);
      if (!Plan)
        return failure();
    }
    for (const std::unique_ptr<Graph> &G : M.getGraphs()) {
      if (Plan)
        addPlanMesh(*G, Plan->config());
      if (failed(split(*G, Plan ? PlanMeshName : MeshName,
                       Plan ? DataParallelAxis : Axis, Diag)))
        return failure();
    }
    return success();
  }

private:
  LogicalResult split(Graph &G, StringRef MeshName, StringRef Axis,
                      DiagnosticEngine &Diag) const {
    const Mesh *M = G.lookupMesh(MeshName);
    if (!M || !M->getAxisSize(Axis)) {
      Diag.error(G.getLoc(),
                 "split-batch: graph @" + G.getName() +
                     (M ? " has no axis '" + Axis + "' in mesh @" + MeshName
                        : " has no mesh @" + MeshName));
      return failure();
    }
    for (const std::unique_ptr<Value> &In : G.getInputs()) {
      const Attribute *BatchDim = In->getAttrs().get("batch_dim");
      if (!BatchDim)
        continue;
      Sharding S;
      S.Mesh = MeshName.str();
      S.DimAxes.resize(In->getType().getRank());
      S.DimAxes[BatchDim->getInt()] = {Axis.str()};
      In->getAttrs().set("batch_split", Attribute::getSharding(std::move(S)));
    }
    return success();
  }

  std::string MeshName, Axis;
  bool FromPlan = false;
};

} // namespace

std::unique_ptr<Pass> autopar::createSplitBatchPass() {
  return std::make_unique<SplitBatchPass>();
}
