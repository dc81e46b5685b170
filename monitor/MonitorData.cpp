//===- MonitorData.cpp - /data.json: the state of a run -------------------===//

#include "monitor/MonitorData.h"
#include "monitor/MetricsLog.h"
#include "monitor/PlanView.h"

#include <algorithm>
#include <cmath>

using namespace llvm;
using namespace autopar;

/// A number, or null for one that JSON cannot hold.
static json::Value number(double D) {
  if (!std::isfinite(D))
    return nullptr;
  return D;
}

static json::Value planJSON(const PlanView &P) {
  const PlanRecord &R = P.Record;
  json::Array Memory;
  for (const StageMemory &M : R.Memory)
    Memory.push_back(M.Total);
  return json::Object{
      {"dir", P.Dir},
      {"model", R.Model},
      {"config", R.Config.str()},
      {"num_gpus", R.NumGpus},
      {"tp", int64_t(R.Config.TP)},
      {"pp", int64_t(R.Config.PP)},
      {"dp", int64_t(R.Config.DP)},
      {"micro_batches", R.Config.MicroBatches},
      {"predicted_bubble", number(R.Predicted.BubbleFraction)},
      {"predicted_step_s", number(R.Predicted.StepSeconds)},
      {"predicted_tokens_per_s", number(R.Predicted.TokensPerSecond)},
      {"predicted_memory", std::move(Memory)},
      {"note", P.Note},
  };
}

/// The fraction of a step spent idle, from a step record; null when the
/// record lacks the times.
static Optional<double> measuredBubble(const json::Object &Record) {
  Optional<double> Idle = Record.getNumber("idle_s");
  Optional<double> Step = Record.getNumber("step_s");
  if (!Idle || !Step || *Step <= 0)
    return None;
  return *Idle / *Step;
}

static json::Value rankJSON(int64_t Rank, const MonitorRank &R,
                            const PlanView *Plan) {
  const json::Object &Rec = R.Latest;
  json::Object Out{{"rank", Rank}};
  Optional<int64_t> Stage;
  if (Plan && Rank < Plan->Record.Config.getNumGpus())
    Stage = Plan->getStage(Rank);
  Out["stage"] = Stage ? json::Value(*Stage) : json::Value(nullptr);
  if (Optional<StringRef> Host = Rec.getString("host"))
    Out["host"] = *Host;
  if (const json::Value *Step = Rec.get("step"))
    Out["step"] = *Step;

  Optional<double> Measured = measuredBubble(Rec);
  Optional<double> Predicted;
  if (Plan && Plan->Record.Config.PP > 1)
    Predicted = Plan->Record.Predicted.BubbleFraction;
  else if (Plan)
    Predicted = 0.0;
  Out["bubble"] = json::Object{
      {"measured", Measured ? number(*Measured) : nullptr},
      {"predicted", Predicted ? number(*Predicted) : nullptr},
      {"measured_warn", Measured && *Measured > BubbleWarnFraction},
      {"predicted_warn", Predicted && *Predicted > BubbleWarnFraction},
  };

  json::Object Memory{{"peak_device_bytes", R.PeakDeviceBytes},
                      {"peak_host_bytes", R.PeakHostBytes}};
  for (StringRef Key : {"device_bytes", "host_bytes"})
    Memory[Key] = Rec.get(Key) ? *Rec.get(Key) : json::Value(nullptr);
  const StageMemory *Pred = nullptr;
  if (Plan && Stage && size_t(*Stage) < Plan->Record.Memory.size())
    Pred = &Plan->Record.Memory[*Stage];
  // The runtime measures what the program allocates (parameters, optimizer
  // state, gradients, activations), not the allowance the plan keeps for
  // the framework (CUDA context, workspaces, fragmentation): that is
  // compared, and the allowance shown apart.
  Memory["predicted_bytes"] =
      Pred ? json::Value(Pred->Total - Pred->Allowance) : nullptr;
  Memory["predicted_allowance_bytes"] =
      Pred ? json::Value(Pred->Allowance) : nullptr;
  if (Pred)
    Memory["predicted"] = json::Object{
        {"weights", Pred->Weights},     {"gradients", Pred->Gradients},
        {"optimizer", Pred->Optimizer}, {"activations", Pred->Activations},
        {"allowance", Pred->Allowance}, {"offloaded", Pred->Offloaded}};
  Out["memory"] = std::move(Memory);
  Out["record"] = json::Object(Rec);
  return Out;
}

/// Lifecycle events decide the run's state; others (heartbeat_lost) only
/// show in the list.
static bool isLifecycle(StringRef Event) {
  return Event == "start" || Event == "failure" || Event == "restart" ||
         Event == "finished" || Event == "stopped" || Event == "gave_up";
}

static json::Value statusJSON(const MetricsLog &Log, double Now) {
  const json::Object *Last = nullptr;
  for (const json::Object &E : Log.getEvents())
    if (isLifecycle(*E.getString("event")))
      Last = &E;
  // The latest step record, its time, and the longest latest step.
  const MonitorRank *Newest = nullptr;
  double LastTime = 0, LongestStep = 0;
  for (const auto &[Rank, R] : Log.getRanks()) {
    if (!Newest || R.Seq > Newest->Seq)
      Newest = &R;
    LastTime = std::max(LastTime, R.Latest.getNumber("time").getValueOr(0));
    LongestStep =
        std::max(LongestStep, R.Latest.getNumber("step_s").getValueOr(0));
  }
  int64_t Attempt = 0;
  if (Newest)
    Attempt = Newest->Latest.getInteger("attempt").getValueOr(0);
  if (!Log.getEvents().empty())
    Attempt = std::max(
        Attempt, Log.getEvents().back().getInteger("attempt").getValueOr(0));
  StringRef Event = Last ? *Last->getString("event") : "";
  int64_t EventSeq = Last ? Last->getInteger("seq").getValueOr(0) : 0;
  bool StepSinceEvent =
      Log.getLastStepSeq() && int64_t(*Log.getLastStepSeq()) > EventSeq;
  // A run with no step for ten of its steps (and at least 30 s) has
  // stopped without saying so.
  double Stale = std::max(30.0, 10 * LongestStep);
  std::string State, Message;
  if (Event == "gave_up") {
    State = "failed";
    Message = "gave up";
  } else if (Event == "finished") {
    State = "finished";
  } else if (Event == "stopped") {
    State = "stopped";
    Message = "stopped by a signal";
  } else if (Event == "failure" && !StepSinceEvent) {
    State = "failed";
    if (Optional<StringRef> M = Last->getString("message"))
      Message = M->str();
  } else if (!Newest) {
    State = "waiting";
    Message = "waiting for the first step";
  } else if (Now - LastTime > Stale) {
    State = "stalled";
    Message = "no step for " + std::to_string(int64_t(Now - LastTime)) + " s";
  } else {
    State = "running";
  }
  json::Object Out{{"state", State},
                   {"message", Message},
                   {"attempt", Attempt},
                   {"ranks", int64_t(Log.getRanks().size())}};
  if (Newest) {
    Out["last_step"] = *Newest->Latest.get("step");
    Out["last_time"] = LastTime;
    Out["age_s"] = number(Now - LastTime);
  } else {
    Out["last_step"] = nullptr;
  }
  return Out;
}

json::Value autopar::buildMonitorData(const MonitorDataInputs &In) {
  const MetricsLog &Log = *In.Log;
  json::Object Doc{{"run_dir", In.RunDir}, {"now", In.Now}};
  Doc["log"] = json::Object{{"path", Log.getPath()},
                            {"exists", Log.exists()},
                            {"error", Log.getReadError()},
                            {"lines", int64_t(Log.getNumLines())},
                            {"step_records", int64_t(Log.getNumStepRecords())},
                            {"malformed_lines", int64_t(Log.getNumMalformed())},
                            {"partial_line", Log.hasPartialLine()}};
  Doc["plan"] = In.Plan ? planJSON(*In.Plan) : json::Value(nullptr);
  Doc["plan_error"] = In.PlanError;
  Doc["status"] = statusJSON(Log, In.Now);

  json::Array Ranks;
  for (const auto &[Rank, R] : Log.getRanks())
    Ranks.push_back(rankJSON(Rank, R, In.Plan));
  Doc["ranks"] = std::move(Ranks);

  // [step, loss, tokens/s], thinned evenly to MaxCurvePoints.
  const std::map<int64_t, MonitorStep> &Steps = Log.getSteps();
  size_t Stride = (Steps.size() + MaxCurvePoints - 1) / MaxCurvePoints;
  json::Array Curve;
  size_t I = 0;
  for (const auto &[Step, S] : Steps) {
    bool Keep = I % std::max<size_t>(Stride, 1) == 0 || I + 1 == Steps.size();
    ++I;
    if (!Keep)
      continue;
    Curve.push_back(
        json::Array{Step, S.Loss ? number(*S.Loss) : nullptr,
                    S.TokensPerS ? number(*S.TokensPerS) : nullptr});
  }
  Doc["steps"] = std::move(Curve);

  const std::vector<json::Object> &Events = Log.getEvents();
  json::Array EventList;
  for (size_t E = Events.size() > MaxEvents ? Events.size() - MaxEvents : 0;
       E < Events.size(); ++E)
    EventList.push_back(json::Object(Events[E]));
  Doc["events"] = std::move(EventList);
  Doc["num_events"] = int64_t(Events.size());
  return Doc;
}
