//===- Report.h - The plan as one self-contained HTML page ------*- C++ -*-===//
//
// report.html: inline CSS and SVG, no scripts, nothing fetched. The
// cluster's topology (nodes, their GPUs by global rank, NVLink and the
// network) with the groups on it (stages as colours, tensor-parallel groups
// outlined, a legend naming the link each group's collectives use), the
// pipeline schedule as a Gantt chart per rank
// (from the schedule simulator, with the bubble highlighted above 20%),
// per-GPU memory as stacked bars against capacity, the alternatives the
// search ranked, and where the step goes. Byte-stable: figures are printed
// with fixed precision and nothing depends on time or paths.
//
//===----------------------------------------------------------------------===//

#ifndef AUTOPAR_CODEGEN_REPORT_H
#define AUTOPAR_CODEGEN_REPORT_H

#include "planner/Search.h"

#include "llvm/ADT/ArrayRef.h"
#include "llvm/Support/Error.h"

#include <string>

namespace autopar {

struct ReportInput {
  std::string Model;
  const Cluster *Cl = nullptr;
  /// The chosen plan first, then the alternatives.
  llvm::ArrayRef<Plan> Plans;
};

llvm::Expected<std::string> renderReport(const ReportInput &In);

/// S with &, <, > and " written as HTML entities (text and attribute
/// values).
std::string escapeHtml(llvm::StringRef S);

} // namespace autopar

#endif // AUTOPAR_CODEGEN_REPORT_H
