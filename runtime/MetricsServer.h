//===- MetricsServer.h - Prometheus text of a running job -------*- C++ -*-===//
//
// `autopar-run --metrics-port P` on rank 0: an HTTP server (cpp-httplib, on
// a thread of its own) whose `/metrics` answers with the Prometheus text
// exposition format (version 0.0.4) of the latest step's records, gathered
// from every rank (docs/Operations.md):
//   - gauges aggregated over the ranks with a `stat` label (min, median,
//     max): step, forward, backward, communication, optimizer and idle
//     seconds, tokens per second, device and host memory;
//   - gauges of the job: the step, loss, learning rate, gradient norm and
//     loss scale (rank 0's; they are the same on every rank), the ranks;
//   - counters summed over the ranks and the steps: bytes taken in by each
//     kind of collective (`op` label) and fetched from each offload tier
//     (`tier` label), steps.
//
//===----------------------------------------------------------------------===//

#ifndef AUTOPAR_RUNTIME_METRICSSERVER_H
#define AUTOPAR_RUNTIME_METRICSSERVER_H

#include "runtime/RunMetrics.h"

#include "llvm/Support/Error.h"

#include <memory>
#include <string>
#include <vector>

namespace autopar {

/// The counters: steps and bytes summed over the ranks and the steps.
struct MetricsTotals {
  uint64_t Steps = 0;
  std::map<std::string, uint64_t> SentBytes, OffloadBytes;
  void add(const std::vector<StepRecord> &Latest);
};
/// The Prometheus text of the ranks' records of the latest step, with the
/// running totals Totals (updated with Latest first).
std::string formatPrometheus(const std::vector<StepRecord> &Latest,
                             const MetricsTotals &Totals);

class MetricsServer {
public:
  /// Listens on Host:Port (port 0: any free port) and serves until
  /// destroyed.
  static llvm::Expected<std::unique_ptr<MetricsServer>>
  start(llvm::StringRef Host, int Port);
  ~MetricsServer();

  /// The port it listens on.
  int getPort() const;
  /// Makes Latest (one record per rank) the step served.
  void update(std::vector<StepRecord> Latest);

  struct Impl;

private:
  explicit MetricsServer(std::unique_ptr<Impl> I);
  std::unique_ptr<Impl> P;
};

} // namespace autopar

#endif // AUTOPAR_RUNTIME_METRICSSERVER_H
