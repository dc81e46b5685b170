//===- Schedule.h - Pipeline-schedule simulation ----------------*- C++ -*-===//
//
// An event simulation of the pipeline schedules the planner considers:
// GPipe, 1F1B (PipeDream-Flush) and Megatron-LM's interleaved 1F1B. Each
// rank runs its forwards and backwards strictly in the order its schedule
// dictates; an action starts when the rank is free and the action it
// depends on has finished (plus one point-to-point send when that action
// ran on another rank). The step time, the bubble and the micro-batches in
// flight per rank come out of the simulation, not out of a closed formula,
// so unbalanced stages, communication latency and the schedule's real
// order are all accounted for. docs/Planner.md ("Pipeline schedules")
// gives the orders and their sources.
//
//===----------------------------------------------------------------------===//

#ifndef AUTOPAR_PLANNER_SCHEDULE_H
#define AUTOPAR_PLANNER_SCHEDULE_H

#include "ir/PipelineOrder.h"
#include "ir/Plan.h"
#include "llvm/ADT/ArrayRef.h"

#include "llvm/ADT/StringRef.h"
#include "llvm/Support/Error.h"

#include <optional>
#include <string>
#include <vector>

namespace autopar {

// ScheduleKind and its names are the plan's (ir/Plan.h).

/// One pipeline to simulate. The model is cut into Stages * VirtualStages
/// *virtual stages* (model chunks) numbered in model order, 0 first.
/// Virtual stage s lives on rank s % Stages as that rank's local chunk
/// s / Stages: local chunk c of rank r holds virtual stage c * Stages + r
/// (Megatron-LM's interleaving). With VirtualStages == 1 virtual stage s
/// is simply rank s.
struct PipelineSpec {
  ScheduleKind Kind = ScheduleKind::OneFOneB;
  /// p >= 1: pipeline ranks.
  unsigned Stages = 1;
  /// v >= 1: model chunks per rank; Interleaved needs v >= 2, the other
  /// schedules v == 1.
  unsigned VirtualStages = 1;
  /// m >= 1: micro-batches per step; Interleaved needs m % p == 0, as
  /// Megatron-LM does.
  unsigned MicroBatches = 1;
  /// Seconds of one micro-batch's forward and backward through each
  /// virtual stage, indexed by virtual stage in model order (see above):
  /// Stages * VirtualStages entries each, finite and >= 0.
  std::vector<double> Forward, Backward;
  /// Latency of one activation (or gradient) send between neighbouring
  /// virtual stages on different ranks. It delays the receiver but does not
  /// occupy either rank (sends overlap compute).
  double P2PSeconds = 0;
  /// Also return each action's finish time (PipelineResult::ForwardFinish
  /// and BackwardFinish), for drawing the schedule.
  bool RecordTimeline = false;

  /// Fails, naming the field, when the spec breaks any rule above.
  llvm::Error validate() const;
};

struct PipelineResult {
  /// Makespan: the last backward's finish, the schedule starting at 0.
  double StepSeconds = 0;
  /// Idle rank-seconds over StepSeconds * Stages: sum over ranks of
  /// (StepSeconds - BusySeconds[r]), divided by StepSeconds * Stages.
  double BubbleFraction = 0;
  /// Per rank: the most micro-batch chunks whose forward has run and whose
  /// backward has not yet finished, at any point of the schedule. It counts
  /// chunk activations: with v chunks per rank, v of them are one
  /// micro-batch's activations for all of the rank's layers.
  std::vector<unsigned> PeakInFlight;
  /// Per rank: seconds spent computing (forwards plus backwards).
  std::vector<double> BusySeconds;
  /// With RecordTimeline: when each virtual stage's forward and backward of
  /// each micro-batch finished, at [Stage * MicroBatches + MicroBatch].
  std::vector<double> ForwardFinish, BackwardFinish;
};

// PipelineAction and each rank's order are ir/PipelineOrder.h's: the
// simulation prices the order schedule-pipeline lowers.

/// The order Spec's schedule dictates, every rank's actions in one flat
/// list: rank r's 2 * VirtualStages * MicroBatches actions come at
/// [r * 2vm, (r + 1) * 2vm), in the order the rank runs them. Fails when
/// the spec is invalid.
llvm::Expected<std::vector<PipelineAction>>
getScheduleOrder(const PipelineSpec &Spec);

/// Simulates one training step of Spec. Fails when the spec is invalid or
/// when the schedule's order deadlocks (the error names the blocked rank
/// and action). Deterministic; cost is linear in Stages * VirtualStages *
/// MicroBatches.
llvm::Expected<PipelineResult> simulatePipeline(const PipelineSpec &Spec);

/// Simulates Spec's times under an explicit order laid out as
/// getScheduleOrder's: the hook for tests and for schedules the planner
/// does not name. Spec.Kind and the rules tied to it (v, m % p) are
/// ignored. Fails when the spec's sizes or times are invalid, when an
/// action is on the wrong rank, out of range or repeated, or when the
/// order deadlocks.
llvm::Expected<PipelineResult>
simulatePipelineOrder(const PipelineSpec &Spec,
                      llvm::ArrayRef<PipelineAction> Order);

/// Per rank, the actions in the order the rank runs them, as PyTorch's
/// pipelining schedules print them: "<virtual stage>F<micro-batch>" for a
/// forward, "<virtual stage>B<micro-batch>" for a backward ("0F0", "3B7").
/// Fails when the spec is invalid.
llvm::Expected<std::vector<std::vector<std::string>>>
getScheduleActions(const PipelineSpec &Spec);

} // namespace autopar

#endif // AUTOPAR_PLANNER_SCHEDULE_H
