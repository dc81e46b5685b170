//===- MonitorServer.h - `autopar monitor RUN_DIR` --------------*- C++ -*-===//
//
// Serves a run's live panel over HTTP (cpp-httplib): `/` the page
// (MonitorPage.h), `/data.json` the run's state (MonitorData.h), rebuilt on
// each request from what metrics.jsonl has grown by and from the plan
// (reloaded when its plan.json changes). Serves until SIGINT or SIGTERM.
//
//===----------------------------------------------------------------------===//

#ifndef AUTOPAR_MONITOR_MONITORSERVER_H
#define AUTOPAR_MONITOR_MONITORSERVER_H

#include "llvm/Support/Error.h"

#include <string>

namespace autopar {

struct MonitorOptions {
  /// The run folder: metrics.jsonl and run.json (docs/Operations.md).
  std::string RunDir;
  /// `--plan`: the plan folder (or its plan.json), instead of the one
  /// run.json names.
  std::string PlanDir;
  /// The address to listen on.
  std::string Host = "127.0.0.1";
  /// The port; 0 picks a free one.
  int Port = 8080;
  /// `--port-file`: where to write the port once listening (through a
  /// temporary file renamed into place, so a reader never sees part of it).
  std::string PortFile;

  /// An error naming the option when one is out of range.
  llvm::Error validate() const;
};

/// Serves RunDir's panel until SIGINT or SIGTERM (then returns 0); prints
/// `autopar monitor: serving RUN_DIR on http://HOST:PORT/` once listening.
/// Returns an ExitCode (driver/OptDriver.h) with a message on standard
/// error when RunDir is not a run folder or the port cannot be had.
int runMonitor(const MonitorOptions &Options);

} // namespace autopar

#endif // AUTOPAR_MONITOR_MONITORSERVER_H
