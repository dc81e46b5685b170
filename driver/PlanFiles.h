//===- PlanFiles.h - The files `autopar -o DIR` writes ----------*- C++ -*-===//
//
// Materializes the chosen plan in the model's IR (layouts, stages and the
// collectives they imply), records the plan as the module's attributes
// (ir/Plan.h) and renders every file of the plan folder from that record:
// plan.air, plan.json (the same attributes as JSON), the launch files, the
// report, and the per-stage programs, each the output of a pipeline that
// passes/PlanPipelines.h builds, run on plan.air's text.
//
//===----------------------------------------------------------------------===//

#ifndef AUTOPAR_DRIVER_PLANFILES_H
#define AUTOPAR_DRIVER_PLANFILES_H

#include "driver/PlanDriver.h"
#include "planner/Search.h"

#include "llvm/Support/Error.h"

#include <string>
#include <utility>
#include <vector>

namespace autopar {

class Module;
class ModelProfile;
struct Cluster;

/// The file of the plan folder that holds the model's inline weights.
constexpr const char *WeightsFileName = "weights.bin";

/// (path, text) pairs, in the order they are written.
using OutputFileList = std::vector<std::pair<std::string, std::string>>;

struct PlanFilesInput {
  const PlanDriverOptions *Options = nullptr;
  const Cluster *Cl = nullptr;
  /// The model's module, as the search saw it; the plan is materialized in
  /// it.
  Module *M = nullptr;
  ModelProfile *Profile = nullptr;
  /// The chosen plan first, then the alternatives (for the report).
  llvm::ArrayRef<Plan> Plans;
  /// The global batch the search was given.
  int64_t GlobalBatch = 0;
  /// The model's inline weights, moved out of the module
  /// (externalizeInlineWeights into WeightsFileName); written to the plan
  /// folder when not empty.
  std::string WeightsFile;
};

/// Every file of the plan folder Options->OutputDir. Notes and warnings
/// (a plan that does not lower to programs) go to stderr unless
/// Options->CheckOnly.
llvm::Expected<OutputFileList> renderPlanFiles(const PlanFilesInput &In);

} // namespace autopar

#endif // AUTOPAR_DRIVER_PLANFILES_H
