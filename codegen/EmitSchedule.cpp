//===- EmitSchedule.cpp - schedule.csv ------------------------------------===//
//
// The pipeline schedule of one step, per pipeline rank: the order
// planner/Schedule.h's getScheduleActions gives, as PyTorch's action
// strings ("<virtual stage>F<micro-batch>", "<virtual stage>B<micro-batch>").
// Every tensor- and data-parallel rank of a pipeline rank runs the same row.
//
//===----------------------------------------------------------------------===//

#include "codegen/LaunchFiles.h"

#include "llvm/Support/raw_ostream.h"

using namespace autopar;
using namespace llvm;

Expected<std::string> autopar::renderScheduleCSV(const PlanRecord &R) {
  PipelineSpec Spec;
  Spec.Kind = R.Plan.Schedule;
  Spec.Stages = unsigned(R.Plan.PP);
  Spec.VirtualStages = unsigned(R.Plan.VPP);
  Spec.MicroBatches = unsigned(R.Plan.NumMicroBatches);
  // Only the order matters here, not the times.
  Spec.Forward.assign(size_t(R.Plan.PP * R.Plan.VPP), 1.0);
  Spec.Backward.assign(size_t(R.Plan.PP * R.Plan.VPP), 2.0);
  Expected<std::vector<std::vector<std::string>>> Actions =
      getScheduleActions(Spec);
  if (!Actions)
    return Actions.takeError();
  std::string S;
  raw_string_ostream OS(S);
  size_t Columns = Actions->empty() ? 0 : Actions->front().size();
  OS << "rank";
  for (size_t I = 0; I != Columns; ++I)
    OS << "," << I;
  OS << "\n";
  for (size_t Rank = 0; Rank != Actions->size(); ++Rank) {
    OS << Rank;
    for (const std::string &A : (*Actions)[Rank])
      OS << "," << A;
    OS << "\n";
  }
  return OS.str();
}
