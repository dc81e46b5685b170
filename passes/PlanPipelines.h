//===- PlanPipelines.h - The pass pipelines a plan lowers with --*- C++ -*-===//
//
// A plan (ir/Plan.h) becomes per-rank programs through pass pipelines that
// are built here, from its PlanConfig, and nowhere else: `autopar -o DIR`
// runs them on plan.air and records them in the plan's
// `training_pipelines` attribute, so that `autopar-opt plan.air
// --passes=<pipeline S>` prints stage<S>.air byte for byte.
//
//===----------------------------------------------------------------------===//

#ifndef AUTOPAR_PASSES_PLANPIPELINES_H
#define AUTOPAR_PASSES_PLANPIPELINES_H

#include "ir/Plan.h"

#include "llvm/Support/Error.h"

#include <string>
#include <vector>

namespace autopar {

class Module;

/// The pipeline that lays the plan a module records out on its graph (the
/// imported model with the batch bound to the micro-batch): the batch
/// split over the data-parallel axis (split-batch), the tensor-parallel
/// layout the search priced (shard-tp), the pipeline cut (partition-stages),
/// each from the plan, then the communication they imply
/// (insert-collectives). What `autopar -o` runs to write plan.air's graph.
std::string buildPlanPipeline();

/// Why a plan cannot be lowered to training programs yet, or "" when it
/// can.
std::string getUnloweredReason(const Module &Plan, const PlanConfig &C);

/// Per pipeline stage, the pipeline that lowers Plan (the module plan.air
/// prints: one graph, batch bound to the micro-batch, collectives inserted)
/// to that stage's training program under C: the stage's part
/// (extract-stage), this rank's tensor-parallel types (localize-tp), the
/// plan's precision (mixed-precision), the loss and backward (autodiff),
/// the schedule's micro-batches (accumulate-micro-batches or
/// schedule-pipeline), the data-parallel gradient reduction
/// (insert-grad-sync with the plan's ZeRO stage) and the AdamW step with
/// the plan's offload (insert-optimizer). Parameters that several stages
/// hold (tied embeddings) are found by extracting every stage of Plan.
llvm::Expected<std::vector<std::string>>
buildTrainingPipelines(const Module &Plan, const PlanConfig &C);

/// Per pipeline stage, the pipeline of its forward program (what
/// `autopar-run --eval` runs); vpp = 1 only.
llvm::Expected<std::vector<std::string>>
buildForwardPipelines(const PlanConfig &C);

/// Runs Pipeline on a copy of the module printed as PlanText (verified
/// first, as autopar-opt does) and returns the result's text: what
/// `autopar-opt plan.air --passes=Pipeline` prints.
llvm::Expected<std::string> runPipelineOnText(llvm::StringRef PlanText,
                                              llvm::StringRef Pipeline);

} // namespace autopar

#endif // AUTOPAR_PASSES_PLANPIPELINES_H
