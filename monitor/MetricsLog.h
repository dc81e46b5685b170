//===- MetricsLog.h - A run's metrics.jsonl, read as it grows ---*- C++ -*-===//
//
// Reads the step and event records of a run folder's metrics.jsonl
// (docs/Operations.md) incrementally: each refresh() parses only the bytes
// appended since the last one, so polling a long run stays cheap. A last
// line without its newline is a record being written and waits for the
// next refresh; a line that is not a record is skipped and counted. A file
// that shrank or was replaced is read again from its start.
//
//===----------------------------------------------------------------------===//

#ifndef AUTOPAR_MONITOR_METRICSLOG_H
#define AUTOPAR_MONITOR_METRICSLOG_H

#include "llvm/Support/JSON.h"

#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <vector>

namespace autopar {

/// What the log says of one rank: its latest step record, and the peaks of
/// its memory over every record read.
struct MonitorRank {
  llvm::json::Object Latest;
  /// The position of Latest in the log (records are numbered from 0).
  uint64_t Seq = 0;
  int64_t PeakDeviceBytes = 0, PeakHostBytes = 0;
};

/// One step as the curves show it: rank 0's loss and throughput (another
/// rank's until rank 0's record is read). A step run again after a restart
/// keeps the values of its latest attempt.
struct MonitorStep {
  int64_t Step = 0, Attempt = 0;
  double Time = 0;
  std::optional<double> Loss, TokensPerS;
  int64_t LossRank = -1;
};

class MetricsLog {
public:
  explicit MetricsLog(std::string Path) : Path(std::move(Path)) {}

  /// Reads what was appended since the last call. A missing file is an
  /// empty log (the run has not written its first record yet).
  void refresh();

  const std::string &getPath() const { return Path; }
  bool exists() const { return Exists; }
  /// The latest read error other than a missing file ("" when none).
  const std::string &getReadError() const { return ReadError; }
  /// Lines read, records among them, and lines skipped as malformed.
  uint64_t getNumLines() const { return Lines; }
  uint64_t getNumStepRecords() const { return StepRecords; }
  uint64_t getNumMalformed() const { return Malformed; }
  /// Whether the file ends in a line still being written.
  bool hasPartialLine() const { return !Pending.empty(); }

  const std::map<int64_t, MonitorRank> &getRanks() const { return Ranks; }
  const std::map<int64_t, MonitorStep> &getSteps() const { return Steps; }
  /// Event records, in the order of the log, each with `seq` (its position
  /// among the records) added.
  const std::vector<llvm::json::Object> &getEvents() const { return Events; }
  /// The position of the latest step record, if any.
  std::optional<uint64_t> getLastStepSeq() const { return LastStepSeq; }

private:
  void reset();
  void parseLine(llvm::StringRef Line);
  void addStep(llvm::json::Object Record, int64_t Step, int64_t Rank);

  std::string Path;
  bool Exists = false;
  std::string ReadError;
  /// Bytes consumed (up to the end of the last complete line read), and the
  /// file's identity, to notice a replaced file.
  uint64_t Offset = 0;
  uint64_t FileId = 0, DeviceId = 0;
  std::string Pending;
  uint64_t Lines = 0, StepRecords = 0, Malformed = 0, Records = 0;
  std::map<int64_t, MonitorRank> Ranks;
  std::map<int64_t, MonitorStep> Steps;
  std::vector<llvm::json::Object> Events;
  std::optional<uint64_t> LastStepSeq;
};

} // namespace autopar

#endif // AUTOPAR_MONITOR_METRICSLOG_H
