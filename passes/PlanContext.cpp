//===- PlanContext.cpp - What the plan passes read from the module --------===//

#include "passes/PlanContext.h"

#include "ir/Diagnostics.h"
#include "ir/Graph.h"

using namespace autopar;
using namespace llvm;

std::optional<PlanContext> autopar::readPlanContext(const Module &M,
                                                    StringRef Pass,
                                                    DiagnosticEngine &Diag) {
  auto Fail = [&](const Twine &Why) -> std::optional<PlanContext> {
    Diag.error(M.getAttrsLoc(), Pass + ": " + Why);
    return std::nullopt;
  };
  Expected<PlanRecord> R = getModulePlan(M);
  if (!R)
    return Fail("from-plan needs the plan the module records (its "
                "attributes, as plan.air has): " +
                toString(R.takeError()));
  // The record holds the cluster as clusterToJSON wrote it.
  std::string Text;
  raw_string_ostream OS(Text);
  OS << attributeToJSON(R->Cluster);
  Expected<Cluster> Cl = parseClusterJSON(OS.str(), "the plan's 'cluster'");
  if (!Cl)
    return Fail(toString(Cl.takeError()));
  return PlanContext{std::move(*R), std::move(*Cl)};
}

void autopar::addPlanMesh(Graph &G, const PlanConfig &C) {
  if (G.lookupMesh(PlanMeshName))
    return;
  Mesh M;
  M.Name = PlanMeshName;
  M.Axes = {{PipelineAxis, C.PP},
            {DataParallelAxis, C.DP},
            {TensorParallelAxis, C.TP}};
  G.addMesh(std::move(M));
}
