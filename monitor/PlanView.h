//===- PlanView.h - The plan a run trains, for the panel --------*- C++ -*-===//
//
// The plan folder of a run (what `autopar -o` wrote): its record
// (plan.json), the mesh its ranks lie on, and the parts of its report.html
// the panel shows as they are (the topology and the planned schedule, both
// inline SVG). Where a run folder's plan is: run.json names it as the
// launcher was given it, relative to a directory the panel cannot know.
//
//===----------------------------------------------------------------------===//

#ifndef AUTOPAR_MONITOR_PLANVIEW_H
#define AUTOPAR_MONITOR_PLANVIEW_H

#include "ir/Graph.h"
#include "ir/Plan.h"

#include "llvm/Support/Error.h"

#include <string>
#include <vector>

namespace autopar {

struct PlanView {
  /// The plan folder.
  std::string Dir;
  PlanRecord Record;
  /// The plan's mesh (passes/PlanContext.h: [pp, dp, tp]).
  Mesh Cluster;
  /// From report.html: the body of its <style>, its <section id="topology">
  /// and its <section id="schedule"> (renamed "planned-schedule"); empty
  /// when the report is missing, with Note saying so.
  std::string Style, Topology, Schedule, Note;

  /// Rank's pipeline stage: its coordinate on the mesh's `pp` axis, ranks
  /// lying on the mesh in row-major order (runtime/MeshGroups.h).
  int64_t getStage(int64_t Rank) const;
};

/// Reads the plan folder Dir (plan.json, and report.html when present).
/// Errors name the file.
llvm::Expected<PlanView> loadPlanView(llvm::StringRef Dir);

/// The plan folder of RunDir: Override (`--plan`, a folder or its
/// plan.json) when given; else RunDir/run.json's `plan`, taken as given,
/// else RunDir's parent when it is a plan folder (run.json's default
/// place, PLAN_DIR/run), else relative to RunDir's parent and grandparent.
/// An error says where it looked. Empty, and no error, when there is no
/// run.json and no Override.
llvm::Expected<std::string> findPlanDir(llvm::StringRef RunDir,
                                        llvm::StringRef Override);

} // namespace autopar

#endif // AUTOPAR_MONITOR_PLANVIEW_H
