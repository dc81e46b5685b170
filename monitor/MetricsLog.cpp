//===- MetricsLog.cpp - A run's metrics.jsonl, read as it grows -----------===//

#include "monitor/MetricsLog.h"

#include "llvm/ADT/StringExtras.h"
#include "llvm/Support/FileSystem.h"

#include <algorithm>
#include <fstream>

using namespace llvm;
using namespace autopar;

void MetricsLog::reset() {
  Offset = 0;
  Pending.clear();
  Lines = StepRecords = Malformed = Records = 0;
  Ranks.clear();
  Steps.clear();
  Events.clear();
  LastStepSeq.reset();
}

void MetricsLog::refresh() {
  sys::fs::file_status Status;
  if (std::error_code EC = sys::fs::status(Path, Status)) {
    // Not written yet (or removed): an empty log.
    if (Exists)
      reset();
    Exists = false;
    ReadError = EC == std::errc::no_such_file_or_directory ? "" : EC.message();
    return;
  }
  Exists = true;
  ReadError.clear();
  sys::fs::UniqueID ID = Status.getUniqueID();
  uint64_t Size = Status.getSize();
  if (ID.getFile() != FileId || ID.getDevice() != DeviceId ||
      Size < Offset + Pending.size()) {
    reset();
    FileId = ID.getFile();
    DeviceId = ID.getDevice();
  }
  uint64_t From = Offset + Pending.size();
  if (Size == From)
    return;
  std::ifstream In(Path, std::ios::binary);
  if (!In) {
    ReadError = "cannot open";
    return;
  }
  In.seekg(std::streamoff(From));
  std::string Chunk(Size - From, '\0');
  In.read(Chunk.data(), std::streamsize(Chunk.size()));
  Chunk.resize(size_t(In.gcount()));
  Pending += Chunk;
  // Complete lines only; the rest is a record being written.
  size_t Start = 0;
  for (size_t End; (End = Pending.find('\n', Start)) != std::string::npos;
       Start = End + 1)
    parseLine(StringRef(Pending).slice(Start, End));
  Offset += Start;
  Pending.erase(0, Start);
}

/// The integer value of Key in O, also when it was written as a float with
/// an integral value.
static std::optional<int64_t> getInt(const json::Object &O, StringRef Key) {
  if (Optional<int64_t> I = O.getInteger(Key))
    return *I;
  if (Optional<double> D = O.getNumber(Key))
    if (*D == double(int64_t(*D)))
      return int64_t(*D);
  return std::nullopt;
}

void MetricsLog::parseLine(StringRef Line) {
  Line = Line.trim();
  if (Line.empty())
    return;
  ++Lines;
  Expected<json::Value> V = json::parse(Line);
  if (!V) {
    consumeError(V.takeError());
    ++Malformed;
    return;
  }
  json::Object *O = V->getAsObject();
  Optional<StringRef> Kind;
  if (O)
    Kind = O->getString("kind");
  if (!Kind) {
    ++Malformed;
    return;
  }
  if (*Kind == "step") {
    std::optional<int64_t> Step = getInt(*O, "step");
    std::optional<int64_t> Rank = getInt(*O, "rank");
    if (!Step || !Rank || *Rank < 0) {
      ++Malformed;
      return;
    }
    addStep(std::move(*O), *Step, *Rank);
    return;
  }
  if (*Kind == "event") {
    if (!O->getString("event")) {
      ++Malformed;
      return;
    }
    (*O)["seq"] = int64_t(Records++);
    Events.push_back(std::move(*O));
    return;
  }
  // A kind of a later version: not an error, and nothing to show.
  ++Records;
}

void MetricsLog::addStep(json::Object Record, int64_t Step, int64_t Rank) {
  uint64_t Seq = Records++;
  ++StepRecords;
  LastStepSeq = Seq;
  int64_t Attempt = getInt(Record, "attempt").value_or(0);
  MonitorStep &S = Steps[Step];
  // A step run again by a later attempt starts over.
  if (S.LossRank >= 0 && S.Attempt != Attempt)
    S = MonitorStep();
  S.Step = Step;
  S.Attempt = Attempt;
  S.Time = std::max(S.Time, Record.getNumber("time").getValueOr(0));
  // Rank 0's values; another rank's until rank 0's record is read.
  if (S.LossRank < 0 || Rank <= S.LossRank) {
    if (Optional<double> Loss = Record.getNumber("loss"))
      S.Loss = *Loss;
    if (Optional<double> T = Record.getNumber("tokens_per_s"))
      S.TokensPerS = *T;
    S.LossRank = Rank;
  }
  MonitorRank &R = Ranks[Rank];
  R.PeakDeviceBytes =
      std::max(R.PeakDeviceBytes, getInt(Record, "device_bytes").value_or(0));
  R.PeakHostBytes =
      std::max(R.PeakHostBytes, getInt(Record, "host_bytes").value_or(0));
  R.Seq = Seq;
  R.Latest = std::move(Record);
}
