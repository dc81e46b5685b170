//===- PlanContext.h - What plan passes read from the module ----*- C++ -*-===//
//
// The passes that lay a chosen plan out (shard-tp, partition-stages and
// split-batch with `from-plan`) take their options from the plan the module
// records (ir/Plan.h: its attributes) instead of their own: the
// configuration, and the cluster with its calibration, so that the layout
// is the one the search priced. PlanPipelines.h builds that pipeline.
//
//===----------------------------------------------------------------------===//

#ifndef AUTOPAR_PASSES_PLANCONTEXT_H
#define AUTOPAR_PASSES_PLANCONTEXT_H

#include "cost/Cluster.h"
#include "ir/Plan.h"

#include "llvm/Support/Error.h"

#include <optional>

namespace autopar {

class DiagnosticEngine;
class Graph;
class Module;

struct PlanContext {
  PlanRecord Record;
  Cluster Cl;
  const PlanConfig &config() const { return Record.Config; }
};

/// The plan M records and its cluster; when M records none (or a cluster
/// that does not read), an error naming Pass reported through Diag at M's
/// attributes, and nullopt.
std::optional<PlanContext>
readPlanContext(const Module &M, llvm::StringRef Pass, DiagnosticEngine &Diag);

/// The mesh a plan lays a graph out over, and its axes: @cluster =
/// [pp, dp, tp] (tensor-parallel ranks innermost, then data-parallel, then
/// pipeline, as Megatron-LM orders them).
constexpr const char *PlanMeshName = "cluster";
constexpr const char *PipelineAxis = "pp", *DataParallelAxis = "dp",
                     *TensorParallelAxis = "tp";

/// Adds the plan's mesh to G unless G has one of that name.
void addPlanMesh(Graph &G, const PlanConfig &C);

} // namespace autopar

#endif // AUTOPAR_PASSES_PLANCONTEXT_H
