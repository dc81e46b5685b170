//===- PlanDriver.h - What `autopar MODEL --gpus N` does --------*- C++ -*-===//
//
// Imports a model, brings it to canonical form with layers, builds the
// cluster, searches for the best plan and writes it: a summary (text or
// JSON) on standard output and, with an output folder, `plan.air` (the
// model annotated with the plan, a header holding the configuration, the
// model's SHA-256, the cluster, the tool version and the predictions) and
// `plan.json`, both byte-stable. The autopar tool only fills
// PlanDriverOptions from its command line.
//
//===----------------------------------------------------------------------===//

#ifndef AUTOPAR_DRIVER_PLANDRIVER_H
#define AUTOPAR_DRIVER_PLANDRIVER_H

#include "frontend/Importer.h"

#include <string>

namespace autopar {

/// The version written into plans; plans of other versions are re-derived,
/// not trusted.
constexpr const char *AutoparVersion = "0.1.0";

struct PlanDriverOptions {
  std::string ModelFile;
  ImportOptions Import;
  /// `--gpu NAME --gpus N --gpus-per-node K`, or `--cluster FILE.json`.
  std::string Gpu = "a100-80gb";
  int64_t Gpus = 0;
  int64_t GpusPerNode = 0;
  std::string ClusterFile;
  /// `--calibration FILE.json`: measured GEMM curves for the cluster's
  /// device (cost/GemmEfficiency.h, written by bench/); none when empty.
  std::string CalibrationFile;
  int64_t GlobalBatch = 0;
  /// `--fix tp=8,pp=4,...`.
  std::string Fix;
  unsigned TopK = 1;
  /// Search threads; 0: the machine's cores, at most 8.
  unsigned Threads = 0;
  bool TpAcrossNodes = false;
  /// Summary format: "text" or "json".
  std::string Format = "text";
  /// Folder to write plan.air and plan.json into; none when empty.
  std::string OutputDir;
  /// Also write the plan's forward programs (`forward<S>.air`, for
  /// `autopar-run --eval DIR`).
  bool ForwardPrograms = false;
  /// `autopar check`: instead of writing OutputDir, compare what would be
  /// written with what is there. The cluster comes from ClusterJSON (the
  /// plan's own description) when it is not empty.
  bool CheckOnly = false;
  std::string ClusterJSON;
  /// `--plan FILE`: evaluate the plan in FILE (a plan.json, or the folder
  /// holding one; possibly hand-edited) on the cluster the options describe
  /// instead of searching; its global batch unless --global-batch.
  std::string GivenPlan;
  /// `--scale-dp K`: run the plan on K times the GPUs by data parallelism
  /// (K times the global batch), without a new search.
  unsigned ScaleDp = 1;
  /// `autopar explain`: print where the (given) plan's time and memory go
  /// instead of writing it; WhatIf (`k=v,...`) changes the plan first.
  bool Explain = false;
  std::string WhatIf;
};

/// Runs the driver; returns an ExitCode (driver/OptDriver.h). No plan that
/// fits, or a pin the model contradicts, is ExitBadOptions with a message
/// that says what would fit.
int runPlanDriver(const PlanDriverOptions &Options);

/// `autopar check MODEL DIR`: re-derives the plan in DIR from MODEL with the
/// inputs recorded in DIR/plan.json (cluster, global batch, pins,
/// dimensions) and compares every file. Returns 0 when they all match, 1
/// with a diff of the first difference when they do not or when no plan
/// fits any more, and the usual codes for unreadable input.
int runCheckDriver(llvm::StringRef ModelFile, llvm::StringRef PlanDir,
                   unsigned Threads);

/// `autopar explain MODEL DIR [--what-if k=v,...]`: the plan in DIR (with
/// the inputs its plan.json records), changed by WhatIf, explained.
int runExplainDriver(llvm::StringRef ModelFile, llvm::StringRef PlanDir,
                     llvm::StringRef WhatIf);

/// `autopar launch --elastic`: the plan in PlanDir re-targeted by data
/// parallelism to Dp replicas on Gpus (= tp x pp x Dp) GPUs of the same
/// cluster, the global batch kept (each replica runs more or fewer
/// micro-batches), written to OutputDir with its programs. Every other
/// choice is the plan's.
int runRetargetDriver(llvm::StringRef ModelFile, llvm::StringRef PlanDir,
                      int64_t Dp, int64_t Gpus, llvm::StringRef OutputDir);

} // namespace autopar

#endif // AUTOPAR_DRIVER_PLANDRIVER_H
