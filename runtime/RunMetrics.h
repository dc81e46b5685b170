//===- RunMetrics.h - Per-step metrics of a training run --------*- C++ -*-===//
//
// What `autopar-run --metrics FILE` and `--metrics-port P` report
// (docs/Operations.md): per step and rank, where the step's time went
// (forward, backward, communication, optimizer, idle), its loss, rate,
// gradient norm and loss scale, memory, the bytes its collectives took in
// and its offloaded fetches, and its timeline of phases per micro-batch.
//
// StepMetricsRecorder watches the executor's nodes (its node and fetch
// observers) and makes the rank's StepRecord; rank 0 gathers every rank's
// record and appends them to FILE (MetricsFile), one JSON line each, and
// hands them to the Prometheus endpoint (runtime/MetricsServer.h).
//
//===----------------------------------------------------------------------===//

#ifndef AUTOPAR_RUNTIME_RUNMETRICS_H
#define AUTOPAR_RUNTIME_RUNMETRICS_H

#include "llvm/ADT/DenseMap.h"
#include "llvm/ADT/STLFunctionalExtras.h"
#include "llvm/ADT/StringMap.h"
#include "llvm/ADT/StringRef.h"
#include "llvm/Support/Error.h"
#include "llvm/Support/JSON.h"

#include <chrono>
#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <vector>

namespace autopar {

class Node;

/// What a node's time counts as: 'F' forward, 'B' backward (a node named
/// `*.grad`, as autodiff names them), 'C' communication, 'O' the optimizer,
/// 'W' waiting for a pipeline receive.
char getNodePhase(const Node &N);

/// The micro-batch a node works on: K when its first result's name has a
/// `.mb<K>` part (schedule-pipeline's and accumulate-micro-batches' names),
/// else -1.
int getNodeMicroBatch(const Node &N);

/// One rank's measurements of one step (docs/Operations.md's step record).
struct StepRecord {
  int64_t Step = 0;
  int Rank = 0;
  std::string Host;
  int Attempt = 0;
  /// Wall-clock Unix seconds at the end of the step.
  double Time = 0;
  double StepSeconds = 0, ForwardSeconds = 0, BackwardSeconds = 0,
         CommSeconds = 0, OptimizerSeconds = 0, IdleSeconds = 0;
  double TokensPerSecond = 0, Loss = 0, Lr = 0;
  std::optional<double> GradNorm, LossScale;
  uint64_t DeviceBytes = 0, HostBytes = 0;
  /// Bytes taken in by each kind of collective (op name) and sent.
  std::map<std::string, uint64_t> SentBytes;
  /// Bytes fetched from each offload tier ("host", "nvme").
  std::map<std::string, uint64_t> OffloadBytes;
  struct Span {
    char Phase = 'F';
    int MicroBatch = -1;
    double StartMs = 0, EndMs = 0;
  };
  std::vector<Span> Timeline;

  /// One JSON object on one line (no newline).
  std::string toJSON() const;
  /// Parses what toJSON writes.
  static llvm::Expected<StepRecord> fromJSON(llvm::StringRef Line);
};

/// Builds a rank's StepRecord from the nodes the executor runs. What a node
/// is (its phase, micro-batch and the bytes a communication takes in) is
/// worked out at its first run and kept.
class StepMetricsRecorder {
public:
  void beginStep(std::chrono::steady_clock::time_point Start);
  void record(const Node &N, std::chrono::steady_clock::time_point Start,
              std::chrono::steady_clock::time_point End);
  void recordFetch(llvm::StringRef Tier, uint64_t Bytes);
  /// The step's record, its time split by phase (the time outside every
  /// node is idle); the caller fills in the rest.
  StepRecord finishStep(std::chrono::steady_clock::time_point End);

private:
  struct NodeFacts {
    char Phase = 'F';
    int MicroBatch = -1;
    /// A communication's operand bytes, by its op (getOpName).
    llvm::StringRef Op;
    uint64_t Bytes = 0;
  };
  const NodeFacts &getFacts(const Node &N);

  std::chrono::steady_clock::time_point Start;
  StepRecord Current;
  double NodeSeconds = 0;
  llvm::DenseMap<const Node *, NodeFacts> Facts;
  /// This step's communication bytes by op (names stay in the op table).
  llvm::StringMap<uint64_t> Sent;
};

/// The resident set of this process in bytes (0 where it cannot be read).
uint64_t getResidentBytes();

/// This host's name.
std::string getHostName();

/// The attempt number `autopar launch` gives (AUTOPAR_LAUNCH_ATTEMPT), else
/// 0.
int getLaunchAttempt();

/// Appends lines to a metrics file, each flushed at once.
class MetricsFile {
public:
  static llvm::Expected<MetricsFile> open(llvm::StringRef Path);
  MetricsFile(MetricsFile &&Other) noexcept;
  MetricsFile &operator=(MetricsFile &&) = delete;
  ~MetricsFile();
  /// Writes Lines (each without a newline) in one write.
  llvm::Error append(const std::vector<std::string> &Lines);

private:
  MetricsFile(std::string Path, int Fd) : Path(std::move(Path)), Fd(Fd) {}
  std::string Path;
  int Fd = -1;
};

/// An event record (docs/Operations.md): its kind, the event, the wall
/// clock's time (getUnixTime), then the members Fields writes.
std::string
formatEventRecord(llvm::StringRef Event,
                  llvm::function_ref<void(llvm::json::OStream &)> Fields);

/// The wall clock in Unix seconds.
double getUnixTime();

/// V printed with the printf format Format (records keep a few digits
/// where llvm::json would print 17), or null when it is not finite.
std::string formatJsonNumber(double V, const char *Format);
/// Key: V, printed so, as a member of J's current object.
void writeJsonNumber(llvm::json::OStream &J, llvm::StringRef Key, double V,
                     const char *Format);

} // namespace autopar

#endif // AUTOPAR_RUNTIME_RUNMETRICS_H
