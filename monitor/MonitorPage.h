//===- MonitorPage.h - The live panel's page --------------------*- C++ -*-===//
//
// One self-contained HTML document: inline CSS, the plan report's topology
// and planned schedule (inline SVG, cut from report.html), and one inline
// script that polls /data.json every second and redraws the measured parts
// (status, measured timeline, bubble, memory, curves, events) in place.
// Nothing is fetched from another host.
//
//===----------------------------------------------------------------------===//

#ifndef AUTOPAR_MONITOR_MONITORPAGE_H
#define AUTOPAR_MONITOR_MONITORPAGE_H

#include "llvm/ADT/StringRef.h"

#include <string>

namespace autopar {

struct PlanView;

/// The page for RunDir; Plan is null when the plan was not found (PlanError
/// says why, and the page says so where the plan's parts would be).
std::string renderMonitorPage(llvm::StringRef RunDir, const PlanView *Plan,
                              llvm::StringRef PlanError);

} // namespace autopar

#endif // AUTOPAR_MONITOR_MONITORPAGE_H
