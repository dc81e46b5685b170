//===- MonitorData.h - /data.json: the state of a run -----------*- C++ -*-===//
//
// What the live panel draws, as one JSON document built from the run's log
// and its plan: per rank the latest step record, its measured bubble and
// memory against the plan's predictions; per step the loss and throughput;
// the events; and whether the run is still going.
//
//===----------------------------------------------------------------------===//

#ifndef AUTOPAR_MONITOR_MONITORDATA_H
#define AUTOPAR_MONITOR_MONITORDATA_H

#include "llvm/ADT/StringRef.h"
#include "llvm/Support/JSON.h"

namespace autopar {

class MetricsLog;
struct PlanView;

/// A bubble (measured or predicted) above this fraction of the step is
/// highlighted.
constexpr double BubbleWarnFraction = 0.2;
/// The curves keep at most this many steps (evenly spread, the latest
/// always among them).
constexpr size_t MaxCurvePoints = 2000;
/// The document keeps the latest events, at most this many.
constexpr size_t MaxEvents = 200;

struct MonitorDataInputs {
  llvm::StringRef RunDir;
  const MetricsLog *Log = nullptr;
  /// Null when the plan was not found (PlanError says why).
  const PlanView *Plan = nullptr;
  llvm::StringRef PlanError;
  /// Unix seconds.
  double Now = 0;
};

/// The /data.json document (the fields are listed in docs/Operations.md).
llvm::json::Value buildMonitorData(const MonitorDataInputs &In);

} // namespace autopar

#endif // AUTOPAR_MONITOR_MONITORDATA_H
