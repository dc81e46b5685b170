//===- RunMonitoring.h - Metrics and heartbeats of a run --------*- C++ -*-===//
//
// What `--metrics FILE`, `--metrics-port P` and `--heartbeat S` add to
// autopar-run's loop (docs/Operations.md): a StepMetricsRecorder fed by the
// executor's observers, the records of every rank gathered after each step
// (a collective over the job, only when metrics are asked for) and appended
// to FILE and served by the Prometheus endpoint on rank 0, and the
// heartbeat thread, which reports a silent rank (standard error, and an
// event record in FILE) and ends the process with RunHeartbeatLost.
//
//===----------------------------------------------------------------------===//

#ifndef AUTOPAR_RUNTIME_RUNMONITORING_H
#define AUTOPAR_RUNTIME_RUNMONITORING_H

#include "runtime/OffloadStore.h"
#include "runtime/RunMetrics.h"

#include "llvm/Support/Error.h"

#include <chrono>
#include <memory>
#include <optional>

namespace autopar {

class Backend;
class Executor;
class HeartbeatMonitor;
class MetricsServer;
struct TrainOptions;

/// The figures of a step the loop knows (the recorder knows the rest).
struct StepFigures {
  double Loss = 0, Lr = 0, TokensPerSecond = 0;
  std::optional<double> GradNorm, LossScale;
};

class RunMonitoring {
public:
  static llvm::Expected<std::unique_ptr<RunMonitoring>>
  start(const TrainOptions &O, Backend &B, const Executor &X);
  ~RunMonitoring();

  /// True when the executor's nodes must be observed (metrics asked for).
  bool recordsSteps() const { return Recording; }
  void recordNode(const Node &N, std::chrono::steady_clock::time_point Start,
                  std::chrono::steady_clock::time_point End);
  void recordFetch(const OffloadPrefetcher::FetchEvent &E);

  void beginStep(int64_t Step, std::chrono::steady_clock::time_point Start);
  /// Ends the step: gathers every rank's record and, on rank 0, writes and
  /// serves them. Every rank must call it when metrics are on.
  llvm::Error endStep(std::chrono::steady_clock::time_point End,
                      const StepFigures &Figures);

private:
  RunMonitoring(Backend &B, const Executor &X);
  Backend &B;
  const Executor &X;
  bool Recording = false;
  int64_t Step = 0;
  std::string Host;
  int Attempt = 0;
  StepMetricsRecorder Recorder;
  std::optional<MetricsFile> File;
  std::unique_ptr<MetricsServer> Server;
  std::unique_ptr<HeartbeatMonitor> Heartbeat;
};

} // namespace autopar

#endif // AUTOPAR_RUNTIME_RUNMONITORING_H
