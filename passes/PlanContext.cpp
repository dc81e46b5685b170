//===- PlanContext.cpp - What the plan passes read from the module --------===//

#include "passes/PlanContext.h"

#include "ir/Diagnostics.h"
#include "ir/Graph.h"

using namespace autopar;
using namespace llvm;

Expected<PlanContext> autopar::getPlanContext(const Module &M, StringRef Pass) {
  Expected<PlanRecord> R = getModulePlan(M);
  if (!R)
    return createStringError(inconvertibleErrorCode(),
                             Pass +
                                 ": from-plan needs the plan the module "
                                 "records (its attributes, as plan.air "
                                 "has): " +
                                 toString(R.takeError()));
  std::string Text;
  raw_string_ostream OS(Text);
  OS << attributeToJSON(R->Cluster);
  Expected<Cluster> Cl = parseClusterJSON(OS.str(), "the plan's 'cluster'");
  if (!Cl)
    return createStringError(inconvertibleErrorCode(),
                             Pass + ": " + toString(Cl.takeError()));
  return PlanContext{std::move(*R), std::move(*Cl)};
}

std::optional<PlanContext> autopar::readPlanContext(const Module &M,
                                                    StringRef Pass,
                                                    DiagnosticEngine &Diag) {
  Expected<PlanContext> P = getPlanContext(M, Pass);
  if (P)
    return std::move(*P);
  Diag.error(M.getAttrsLoc(), toString(P.takeError()));
  return std::nullopt;
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
