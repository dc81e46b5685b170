//===- LowerPlan.h - A plan's per-rank training programs --------*- C++ -*-===//
//
// What `autopar -o DIR` writes beside plan.air for the runtime: per
// pipeline stage one SPMD training program (`stage<S>.air`), lowered from
// the plan's partitioned forward by the training passes (autodiff,
// accumulate-micro-batches, insert-grad-sync, insert-optimizer). The
// runtime (autopar-run DIR) interprets these and never plans. See
// docs/Runtime.md for what the programs hold and which plans lower so far.
//
//===----------------------------------------------------------------------===//

#ifndef AUTOPAR_DRIVER_LOWERPLAN_H
#define AUTOPAR_DRIVER_LOWERPLAN_H

#include "cost/ModelState.h"
#include "planner/Search.h"

#include "llvm/Support/Error.h"

#include <string>
#include <utility>
#include <vector>

namespace autopar {

class Module;

/// Why a plan cannot be lowered to programs yet, or "" when it can.
std::string getUnloweredReason(const Module &Plan, const PlanConfig &C);

/// The training programs of Plan (the module plan.air prints: one graph,
/// batch bound to the micro-batch, collectives inserted) under C, as (file
/// name, text) pairs in stage order. Plan is not changed. C's precision
/// bf16 or fp16 computes in it over fp32 master parameters
/// (mixed-precision); fp32 computes in fp32.
llvm::Expected<std::vector<std::pair<std::string, std::string>>>
lowerPlanToPrograms(const Module &Plan, const PlanConfig &C,
                    OptimizerKind Optimizer);

/// The forward programs of Plan (`forward<S>.air` per pipeline stage: the
/// stage's forward for one micro-batch on each rank, tensor-parallel types,
/// Send/Recv between stages, the last stage's outputs whole), what
/// `autopar-run --eval DIR` runs to check a plan's numerics against the
/// model's. Lowered for vpp = 1.
llvm::Expected<std::vector<std::pair<std::string, std::string>>>
lowerPlanToForwardPrograms(const Module &Plan, const PlanConfig &C);

} // namespace autopar

#endif // AUTOPAR_DRIVER_LOWERPLAN_H
