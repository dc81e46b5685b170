//===- RunMonitoring.cpp - Metrics and heartbeats of a training run -------===//
//
// See RunMonitoring.h.
//
//===----------------------------------------------------------------------===//

#include "runtime/RunMonitoring.h"
#include "runtime/Backend.h"
#include "runtime/Executor.h"
#include "runtime/Heartbeat.h"
#include "runtime/MetricsServer.h"
#include "runtime/RunDriver.h"
#include "runtime/TrainDriver.h"
#include "runtime/TrainReports.h"

#include "ir/Diagnostics.h"
#include "ir/Graph.h"

#include "llvm/Support/JSON.h"
#include "llvm/Support/WithColor.h"
#include "llvm/Support/raw_ostream.h"

#include <chrono>
#include <cstdlib>

using namespace autopar;
using namespace llvm;

/// The node a rank is running, for its heartbeats: "node '%x' (AllReduce)".
static std::string describeActivity(const Executor &X) {
  const Node *N = X.getCurrentNode();
  return N ? describeNode(*N) : "starting";
}

Expected<std::unique_ptr<RunMonitoring>>
RunMonitoring::start(const TrainOptions &O, Backend &B, const Executor &X) {
  std::unique_ptr<RunMonitoring> M(new RunMonitoring(B, X));
  Communicator &Comm = B.getCommunicator();
  M->Recording = !O.MetricsFile.empty() || O.MetricsPort >= 0;
  M->Host = getHostName();
  M->Attempt = getLaunchAttempt();
  if (Comm.getRank() == 0 && !O.MetricsFile.empty()) {
    Expected<MetricsFile> F = MetricsFile::open(O.MetricsFile);
    if (!F)
      return makeExitError(RunIOError, toString(F.takeError()));
    M->File.emplace(std::move(*F));
  }
  if (Comm.getRank() == 0 && O.MetricsPort >= 0) {
    Expected<std::unique_ptr<MetricsServer>> S =
        MetricsServer::start("0.0.0.0", O.MetricsPort);
    if (!S)
      return makeExitError(RunBadOptions, toString(S.takeError()));
    M->Server = std::move(*S);
    WithColor::note(errs(), "autopar-run")
        << "serving metrics on http://" << M->Host << ":"
        << M->Server->getPort() << "/metrics\n";
  }
  if (O.HeartbeatSeconds > 0 && Comm.getNumRanks() > 1) {
    std::string MetricsPath = O.MetricsFile;
    double Period = O.HeartbeatSeconds;
    int Rank = Comm.getRank();
    int Attempt = M->Attempt;
    std::string Host = M->Host;
    Expected<std::unique_ptr<HeartbeatMonitor>> H = HeartbeatMonitor::start(
        B, Period, [&X] { return describeActivity(X); },
        [=](const HeartbeatLoss &L) {
          std::string Message;
          raw_string_ostream OS(Message);
          OS << "rank " << L.Rank << " (host " << L.Host
             << ") sent no heartbeat for " << format("%.2f", L.SilentSeconds)
             << " s (--heartbeat " << format("%g", Period)
             << "); its last said step " << L.Step << ", " << L.Activity
             << "; rank " << Rank << " stops the job";
          OS.flush();
          printToolError("autopar-run", Message);
          if (!MetricsPath.empty()) {
            if (Expected<MetricsFile> F = MetricsFile::open(MetricsPath)) {
              consumeError(F->append(
                  {formatEventRecord("heartbeat_lost", [&](json::OStream &J) {
                    J.attribute("attempt", Attempt);
                    J.attribute("rank", L.Rank);
                    J.attribute("host", L.Host);
                    J.attribute("step", L.Step);
                    J.attribute("op", L.Activity);
                    writeJsonNumber(J, "silent_s", L.SilentSeconds, "%.3f");
                    J.attribute("noticed_by", Rank);
                    J.attribute("noticed_on", Host);
                  })}));
            } else {
              consumeError(F.takeError());
            }
          }
          std::_Exit(RunHeartbeatLost);
        });
    if (!H)
      return makeExitError(RunFailure, toString(H.takeError()));
    M->Heartbeat = std::move(*H);
  }
  return M;
}

RunMonitoring::RunMonitoring(Backend &B, const Executor &X) : B(B), X(X) {}

RunMonitoring::~RunMonitoring() = default;

void RunMonitoring::recordNode(const Node &N,
                               std::chrono::steady_clock::time_point Start,
                               std::chrono::steady_clock::time_point End) {
  Recorder.record(N, Start, End);
}

void RunMonitoring::recordFetch(const OffloadPrefetcher::FetchEvent &E) {
  Recorder.recordFetch(getOffloadTierName(E.Tier), E.Bytes);
}

void RunMonitoring::beginStep(int64_t S,
                              std::chrono::steady_clock::time_point Start) {
  Step = S;
  if (Heartbeat)
    Heartbeat->setStep(S);
  Recorder.beginStep(Start);
}

Error RunMonitoring::endStep(std::chrono::steady_clock::time_point End,
                             const StepFigures &F) {
  if (!Recording)
    return Error::success();
  StepRecord R = Recorder.finishStep(End);
  R.Step = Step;
  R.Rank = B.getCommunicator().getRank();
  R.Host = Host;
  R.Attempt = Attempt;
  R.Time = getUnixTime();
  R.TokensPerSecond = F.TokensPerSecond;
  R.Loss = F.Loss;
  R.Lr = F.Lr;
  R.GradNorm = F.GradNorm;
  R.LossScale = F.LossScale;
  R.DeviceBytes = X.getParamBytes() + X.getPeakActivationBytes() +
                  X.getPeakGatheredBytes() + X.getPeakFetchedBytes();
  R.HostBytes = getResidentBytes();
  Expected<std::vector<std::string>> All = gatherTexts(B, R.toJSON());
  if (!All)
    return makeExitError(RunFailure, "rank " + Twine(R.Rank) + ": --metrics: " +
                                         toString(All.takeError()));
  if (R.Rank != 0)
    return Error::success();
  if (File)
    if (Error E = File->append(*All))
      return makeExitError(RunIOError, toString(std::move(E)));
  if (Server) {
    std::vector<StepRecord> Records;
    for (const std::string &Line : *All) {
      Expected<StepRecord> Parsed = StepRecord::fromJSON(Line);
      if (!Parsed)
        return makeExitError(RunFailure, toString(Parsed.takeError()));
      Records.push_back(std::move(*Parsed));
    }
    Server->update(std::move(Records));
  }
  return Error::success();
}
