//===- RunMetrics.cpp - Per-step metrics of a training run ----------------===//
//
// See RunMetrics.h. Records are written with llvm::json::OStream, members
// in a fixed order, so that two records of the same figures are the same
// bytes.
//
//===----------------------------------------------------------------------===//

#include "runtime/RunMetrics.h"

#include "ir/Graph.h"
#include "ir/OpFacts.h"

#include "llvm/Support/Format.h"
#include "llvm/Support/FormatVariadic.h"
#include "llvm/Support/JSON.h"
#include "llvm/Support/raw_ostream.h"

#include <cerrno>
#include <cmath>
#include <cstdlib>
#include <cstring>
#include <fcntl.h>
#include <unistd.h>

using namespace autopar;
using namespace llvm;

char autopar::getNodePhase(const Node &N) {
  OpId Op = N.getOp();
  if (Op == OpId::AdamW || Op == OpId::Sgd)
    return 'O';
  if (Op == OpId::Recv)
    return 'W';
  if (isCommunicationOp(Op))
    return 'C';
  // Autodiff names its nodes `<forward node>.grad`, and schedule-pipeline
  // appends `.mb<K>`; gradient ops without a name are backward too.
  StringRef Name = N.getName();
  for (size_t At = Name.find(".grad"); At != StringRef::npos;
       At = Name.find(".grad", At + 1))
    if (At + 5 == Name.size() || Name[At + 5] == '.')
      return 'B';
  return N.getOpName().endswith("Grad") ? 'B' : 'F';
}

int autopar::getNodeMicroBatch(const Node &N) {
  if (N.getNumResults() == 0)
    return -1;
  StringRef Name = N.getResult(0)->getName();
  // The last `.mb<K>` followed by the end or a dot.
  int Found = -1;
  for (size_t At = Name.find(".mb"); At != StringRef::npos;
       At = Name.find(".mb", At + 1)) {
    StringRef Rest = Name.drop_front(At + 3);
    StringRef Digits =
        Rest.take_while([](char C) { return C >= '0' && C <= '9'; });
    unsigned K;
    if (!Digits.empty() &&
        (Rest.size() == Digits.size() || Rest[Digits.size()] == '.') &&
        !Digits.getAsInteger(10, K) && K < (1u << 30))
      Found = int(K);
  }
  return Found;
}

void StepMetricsRecorder::beginStep(std::chrono::steady_clock::time_point S) {
  Start = S;
  Current = StepRecord();
  NodeSeconds = 0;
  Sent.clear();
}

const StepMetricsRecorder::NodeFacts &
StepMetricsRecorder::getFacts(const Node &N) {
  auto [It, New] = Facts.try_emplace(&N);
  NodeFacts &F = It->second;
  if (!New)
    return F;
  F.Phase = getNodePhase(N);
  F.MicroBatch = getNodeMicroBatch(N);
  if (F.Phase == 'C' && N.getNumOperands() && N.getOperand(0)) {
    F.Op = N.getOpName();
    F.Bytes =
        uint64_t(N.getOperand(0)->getType().getStaticSizeInBytes().value_or(0));
  }
  return F;
}

void StepMetricsRecorder::record(const Node &N,
                                 std::chrono::steady_clock::time_point From,
                                 std::chrono::steady_clock::time_point To) {
  const NodeFacts &F = getFacts(N);
  double Seconds = std::chrono::duration<double>(To - From).count();
  NodeSeconds += Seconds;
  switch (F.Phase) {
  case 'O':
    Current.OptimizerSeconds += Seconds;
    break;
  case 'W':
    Current.IdleSeconds += Seconds;
    break;
  case 'C':
    Current.CommSeconds += Seconds;
    break;
  case 'B':
    Current.BackwardSeconds += Seconds;
    break;
  default:
    Current.ForwardSeconds += Seconds;
    break;
  }
  if (!F.Op.empty())
    Sent[F.Op] += F.Bytes;
  double StartMs =
      std::chrono::duration<double, std::milli>(From - Start).count();
  double EndMs = std::chrono::duration<double, std::milli>(To - Start).count();
  std::vector<StepRecord::Span> &T = Current.Timeline;
  if (!T.empty() && T.back().Phase == F.Phase &&
      T.back().MicroBatch == F.MicroBatch) {
    T.back().EndMs = EndMs;
    return;
  }
  T.push_back({F.Phase, F.MicroBatch, StartMs, EndMs});
}

void StepMetricsRecorder::recordFetch(StringRef Tier, uint64_t Bytes) {
  Current.OffloadBytes[Tier.str()] += Bytes;
}

StepRecord
StepMetricsRecorder::finishStep(std::chrono::steady_clock::time_point End) {
  StepRecord R = std::move(Current);
  R.StepSeconds = std::chrono::duration<double>(End - Start).count();
  // The time between nodes (the interpreter, input and output copies) is
  // idle too.
  R.IdleSeconds += std::max(0.0, R.StepSeconds - NodeSeconds);
  for (const auto &Entry : Sent)
    R.SentBytes[Entry.getKey().str()] = Entry.getValue();
  Current = StepRecord();
  return R;
}

std::string StepRecord::toJSON() const {
  std::string Text;
  raw_string_ostream OS(Text);
  json::OStream J(OS);
  auto Num = [&](StringRef Key, double V) {
    writeJsonNumber(J, Key, V, "%.7g");
  };
  J.object([&] {
    J.attribute("kind", "step");
    J.attribute("step", Step);
    J.attribute("rank", Rank);
    J.attribute("host", Host);
    J.attribute("attempt", Attempt);
    // Milliseconds of the wall clock.
    writeJsonNumber(J, "time", Time, "%.3f");
    Num("step_s", StepSeconds);
    Num("forward_s", ForwardSeconds);
    Num("backward_s", BackwardSeconds);
    Num("comm_s", CommSeconds);
    Num("optimizer_s", OptimizerSeconds);
    Num("idle_s", IdleSeconds);
    Num("tokens_per_s", TokensPerSecond);
    Num("loss", Loss);
    Num("lr", Lr);
    if (GradNorm)
      Num("grad_norm", *GradNorm);
    if (LossScale)
      Num("loss_scale", *LossScale);
    J.attribute("device_bytes", int64_t(DeviceBytes));
    J.attribute("host_bytes", int64_t(HostBytes));
    auto Map = [&](StringRef Key, const std::map<std::string, uint64_t> &M) {
      J.attributeObject(Key, [&] {
        for (const auto &[K, V] : M)
          J.attribute(K, int64_t(V));
      });
    };
    Map("sent_bytes", SentBytes);
    Map("offload_bytes", OffloadBytes);
    J.attributeArray("timeline", [&] {
      for (const Span &S : Timeline)
        J.array([&] {
          J.value(std::string(1, S.Phase));
          J.value(S.MicroBatch);
          // Microseconds.
          J.rawValue(formatJsonNumber(S.StartMs, "%.3f"));
          J.rawValue(formatJsonNumber(S.EndMs, "%.3f"));
        });
    });
  });
  OS.flush();
  return Text;
}

Expected<StepRecord> StepRecord::fromJSON(StringRef Line) {
  Expected<json::Value> V = json::parse(Line);
  if (!V)
    return V.takeError();
  const json::Object *O = V->getAsObject();
  auto Bad = [&](const Twine &Why) {
    return createStringError(inconvertibleErrorCode(),
                             "not a step record: " + Why);
  };
  if (!O || O->getString("kind") != StringRef("step"))
    return Bad("its kind is not \"step\"");
  StepRecord R;
  auto Int = [&](StringRef K) { return O->getInteger(K).getValueOr(0); };
  auto Num = [&](StringRef K) { return O->getNumber(K).getValueOr(0); };
  R.Step = Int("step");
  R.Rank = int(Int("rank"));
  R.Host = O->getString("host").getValueOr("").str();
  R.Attempt = int(Int("attempt"));
  R.Time = Num("time");
  R.StepSeconds = Num("step_s");
  R.ForwardSeconds = Num("forward_s");
  R.BackwardSeconds = Num("backward_s");
  R.CommSeconds = Num("comm_s");
  R.OptimizerSeconds = Num("optimizer_s");
  R.IdleSeconds = Num("idle_s");
  R.TokensPerSecond = Num("tokens_per_s");
  R.Loss = Num("loss");
  R.Lr = Num("lr");
  if (auto G = O->getNumber("grad_norm"))
    R.GradNorm = *G;
  if (auto S = O->getNumber("loss_scale"))
    R.LossScale = *S;
  R.DeviceBytes = uint64_t(Int("device_bytes"));
  R.HostBytes = uint64_t(Int("host_bytes"));
  auto Map = [&](StringRef K, std::map<std::string, uint64_t> &M) {
    if (const json::Object *Sub = O->getObject(K))
      for (const auto &KV : *Sub)
        M[KV.first.str()] = uint64_t(KV.second.getAsInteger().getValueOr(0));
  };
  Map("sent_bytes", R.SentBytes);
  Map("offload_bytes", R.OffloadBytes);
  if (const json::Array *T = O->getArray("timeline"))
    for (const json::Value &E : *T) {
      const json::Array *A = E.getAsArray();
      if (!A || A->size() != 4)
        return Bad("a timeline span is not [phase, micro_batch, start, end]");
      Span S;
      StringRef Phase = (*A)[0].getAsString().getValueOr("F");
      S.Phase = Phase.empty() ? 'F' : Phase[0];
      S.MicroBatch = int((*A)[1].getAsInteger().getValueOr(-1));
      S.StartMs = (*A)[2].getAsNumber().getValueOr(0);
      S.EndMs = (*A)[3].getAsNumber().getValueOr(0);
      R.Timeline.push_back(S);
    }
  return R;
}

uint64_t autopar::getResidentBytes() {
  FILE *F = std::fopen("/proc/self/statm", "r");
  if (!F)
    return 0;
  unsigned long long Size = 0, Resident = 0;
  int Read = std::fscanf(F, "%llu %llu", &Size, &Resident);
  std::fclose(F);
  if (Read != 2)
    return 0;
  return uint64_t(Resident) * uint64_t(::sysconf(_SC_PAGESIZE));
}

std::string autopar::getHostName() {
  char Name[256] = {0};
  if (::gethostname(Name, sizeof(Name) - 1) != 0)
    return "unknown";
  return Name;
}

int autopar::getLaunchAttempt() {
  const char *A = std::getenv("AUTOPAR_LAUNCH_ATTEMPT");
  int N = 0;
  if (!A || StringRef(A).getAsInteger(10, N) || N < 0)
    return 0;
  return N;
}

Expected<MetricsFile> MetricsFile::open(StringRef Path) {
  int Fd = ::open(Path.str().c_str(), O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC,
                  0644);
  if (Fd < 0)
    return createStringError(inconvertibleErrorCode(),
                             "cannot open --metrics file '" + Path +
                                 "': " + std::strerror(errno));
  return MetricsFile(Path.str(), Fd);
}

MetricsFile::MetricsFile(MetricsFile &&Other) noexcept
    : Path(std::move(Other.Path)), Fd(Other.Fd) {
  Other.Fd = -1;
}

MetricsFile::~MetricsFile() {
  if (Fd >= 0)
    ::close(Fd);
}

Error MetricsFile::append(const std::vector<std::string> &Lines) {
  std::string Text;
  for (const std::string &L : Lines)
    Text += L + "\n";
  // O_APPEND: each write lands at the end, whole, even with another
  // process (autopar launch) appending events.
  const char *P = Text.data();
  size_t Left = Text.size();
  while (Left) {
    ssize_t N = ::write(Fd, P, Left);
    if (N < 0 && errno == EINTR)
      continue;
    if (N <= 0)
      return createStringError(inconvertibleErrorCode(),
                               "cannot write --metrics file '" + Path +
                                   "': " + std::strerror(errno));
    P += N;
    Left -= size_t(N);
  }
  return Error::success();
}

double autopar::getUnixTime() {
  return std::chrono::duration<double>(
             std::chrono::system_clock::now().time_since_epoch())
      .count();
}

std::string
autopar::formatEventRecord(StringRef Event,
                           function_ref<void(json::OStream &)> Fields) {
  std::string Text;
  raw_string_ostream OS(Text);
  json::OStream J(OS);
  J.object([&] {
    J.attribute("kind", "event");
    J.attribute("event", Event);
    // Milliseconds of the wall clock.
    writeJsonNumber(J, "time", getUnixTime(), "%.3f");
    Fields(J);
  });
  OS.flush();
  return Text;
}

std::string autopar::formatJsonNumber(double V, const char *Format) {
  if (!std::isfinite(V))
    return "null";
  return formatv("{0}", format(Format, V)).str();
}

void autopar::writeJsonNumber(json::OStream &J, StringRef Key, double V,
                              const char *Format) {
  J.attributeBegin(Key);
  J.rawValue(formatJsonNumber(V, Format));
  J.attributeEnd();
}
