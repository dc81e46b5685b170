//===- PipelineOrder.h - The order a pipeline schedule runs in --*- C++ -*-===//
//
// One function says in which order a pipeline rank runs its forwards and
// backwards under a schedule (GPipe, 1F1B, interleaved 1F1B). The planner's
// simulation prices this order (planner/Schedule.h) and schedule-pipeline
// lowers it (passes/SchedulePipeline.cpp), so the plan predicts the program
// that runs.
//
//===----------------------------------------------------------------------===//

#ifndef AUTOPAR_IR_PIPELINEORDER_H
#define AUTOPAR_IR_PIPELINEORDER_H

#include "ir/Plan.h"

#include <vector>

namespace autopar {

/// One action of a rank's order: a forward or backward of one micro-batch
/// through one virtual stage (model chunk c of rank r is virtual stage
/// c * Stages + r).
struct PipelineAction {
  unsigned Stage = 0;
  unsigned MicroBatch = 0;
  bool Backward = false;
};

/// Rank's 2 * VirtualStages * MicroBatches actions in the order it runs
/// them under Kind. Assumes a valid spec (Interleaved: VirtualStages >= 2
/// and MicroBatches % Stages == 0; the others VirtualStages == 1).
std::vector<PipelineAction> getRankOrder(ScheduleKind Kind, unsigned Stages,
                                         unsigned VirtualStages,
                                         unsigned MicroBatches, unsigned Rank);

} // namespace autopar

#endif // AUTOPAR_IR_PIPELINEORDER_H
