//===- MonitorServer.cpp - `autopar monitor RUN_DIR` ----------------------===//

#include "monitor/MonitorServer.h"
#include "driver/OptDriver.h"
#include "monitor/MetricsLog.h"
#include "monitor/MonitorData.h"
#include "monitor/MonitorPage.h"
#include "monitor/PlanView.h"

#include "llvm/ADT/SmallString.h"
#include "llvm/Support/Chrono.h"
#include "llvm/Support/FileSystem.h"
#include "llvm/Support/FormatVariadic.h"
#include "llvm/Support/Path.h"
#include "llvm/Support/Process.h"
#include "llvm/Support/WithColor.h"
#include "llvm/Support/raw_ostream.h"

#include <httplib.h>

#include <atomic>
#include <chrono>
#include <csignal>
#include <mutex>
#include <optional>
#include <thread>

#include <pthread.h>
#include <sys/socket.h>

using namespace llvm;
using namespace autopar;

Error MonitorOptions::validate() const {
  if (RunDir.empty())
    return createStringError(inconvertibleErrorCode(),
                             "no run folder given; usage: autopar monitor "
                             "RUN_DIR [--port P] [--plan PLAN_DIR]");
  if (Port < 0 || Port > 65535)
    return createStringError(inconvertibleErrorCode(),
                             "--port %d: expected 0 (a free port) to 65535",
                             Port);
  if (Host.empty())
    return createStringError(inconvertibleErrorCode(),
                             "--host: an address is required");
  return Error::success();
}

namespace {

/// What the handlers share: the log, read incrementally, and the plan,
/// found again while run.json names none that exists, reloaded when its
/// plan.json changes. One request at a time reads them.
class MonitorState {
public:
  MonitorState(const MonitorOptions &O, std::string MetricsPath)
      : RunDir(O.RunDir), PlanOverride(O.PlanDir), Log(std::move(MetricsPath)) {
  }

  /// Finds and loads the plan; false with PlanError set when there is none.
  bool refreshPlan();
  const std::string &getPlanError() const { return PlanError; }

  std::string page() {
    std::lock_guard<std::mutex> Lock(Mu);
    refreshPlan();
    return renderMonitorPage(RunDir, Plan ? &*Plan : nullptr, PlanError);
  }

  std::string data() {
    std::lock_guard<std::mutex> Lock(Mu);
    refreshPlan();
    Log.refresh();
    MonitorDataInputs In;
    In.RunDir = RunDir;
    In.Log = &Log;
    In.Plan = Plan ? &*Plan : nullptr;
    In.PlanError = PlanError;
    In.Now = std::chrono::duration<double>(
                 std::chrono::system_clock::now().time_since_epoch())
                 .count();
    return formatv("{0:2}", buildMonitorData(In)).str() + "\n";
  }

private:
  std::mutex Mu;
  std::string RunDir, PlanOverride;
  MetricsLog Log;
  std::string PlanDir, PlanError;
  std::optional<PlanView> Plan;
  sys::TimePoint<> PlanTime;
};

} // namespace

bool MonitorState::refreshPlan() {
  if (PlanDir.empty()) {
    Expected<std::string> Dir = findPlanDir(RunDir, PlanOverride);
    if (!Dir) {
      PlanError = toString(Dir.takeError());
      return false;
    }
    if (Dir->empty()) {
      PlanError = "'" + RunDir +
                  "' has no run.json to name the plan; give it with --plan";
      return false;
    }
    PlanDir = *Dir;
  }
  SmallString<256> Json(PlanDir);
  sys::path::append(Json, "plan.json");
  sys::fs::file_status Status;
  if (std::error_code EC = sys::fs::status(Json, Status)) {
    PlanError = "cannot read '" + Json.str().str() + "': " + EC.message();
    Plan.reset();
    return false;
  }
  if (Plan && Status.getLastModificationTime() == PlanTime)
    return true;
  Expected<PlanView> V = loadPlanView(PlanDir);
  if (!V) {
    PlanError = toString(V.takeError());
    Plan.reset();
    return false;
  }
  Plan = std::move(*V);
  PlanTime = Status.getLastModificationTime();
  PlanError.clear();
  return true;
}

/// Writes Text to Path through a temporary file renamed into place.
static Error writeAtomically(StringRef Path, StringRef Text) {
  std::string Temp =
      (Path + ".tmp" + Twine(sys::Process::getProcessId())).str();
  {
    std::error_code EC;
    raw_fd_ostream OS(Temp, EC);
    if (EC)
      return createStringError(EC, "cannot write '%s': %s", Temp.c_str(),
                               EC.message().c_str());
    OS << Text;
    OS.close();
    if (OS.has_error())
      return createStringError(OS.error(), "cannot write '%s': %s",
                               Temp.c_str(), OS.error().message().c_str());
  }
  if (std::error_code EC = sys::fs::rename(Temp, Path)) {
    sys::fs::remove(Temp);
    return createStringError(EC, "cannot write '%s': %s", Path.str().c_str(),
                             EC.message().c_str());
  }
  return Error::success();
}

int autopar::runMonitor(const MonitorOptions &O) {
  auto Fail = [](int Code, const Twine &Message) {
    WithColor::error(errs(), "autopar monitor") << Message << "\n";
    return Code;
  };
  if (Error E = O.validate())
    return Fail(ExitBadOptions, toString(std::move(E)));
  static const char *const WhatToGive =
      "give the folder `autopar launch` writes (--run-dir, by default "
      "PLAN_DIR/run), or a folder holding the metrics.jsonl of "
      "`autopar-run --metrics`";
  if (!sys::fs::is_directory(O.RunDir))
    return Fail(ExitIOError, "run folder '" + O.RunDir +
                                 "' does not exist or is not a folder; " +
                                 WhatToGive);
  SmallString<256> Metrics(O.RunDir), RunJson(O.RunDir);
  sys::path::append(Metrics, "metrics.jsonl");
  sys::path::append(RunJson, "run.json");
  if (!sys::fs::exists(Metrics) && !sys::fs::exists(RunJson))
    return Fail(ExitIOError, "'" + O.RunDir +
                                 "' holds neither metrics.jsonl nor "
                                 "run.json, so it is not a run folder; " +
                                 WhatToGive);

  MonitorState State(O, Metrics.str().str());
  if (!State.refreshPlan()) {
    // A --plan that is not a plan is the user's to fix; a plan run.json
    // names but that is not found only leaves the predictions out.
    if (!O.PlanDir.empty())
      return Fail(ExitBadOptions, State.getPlanError());
    WithColor::warning(errs(), "autopar monitor")
        << State.getPlanError()
        << " (the panel shows the measurements without the plan)\n";
  }

  httplib::Server Server;
  // SO_REUSEADDR only: httplib's default also sets SO_REUSEPORT, with which
  // a second server could bind a port that is in use.
  Server.set_socket_options([](socket_t Sock) {
    int Yes = 1;
    setsockopt(Sock, SOL_SOCKET, SO_REUSEADDR, &Yes, sizeof(Yes));
  });
  Server.Get("/", [&](const httplib::Request &, httplib::Response &Res) {
    Res.set_header("Cache-Control", "no-store");
    Res.set_content(State.page(), "text/html; charset=utf-8");
  });
  Server.Get("/data.json",
             [&](const httplib::Request &, httplib::Response &Res) {
               Res.set_header("Cache-Control", "no-store");
               Res.set_content(State.data(), "application/json");
             });

  // SIGINT and SIGTERM go to one thread that stops the server: blocked here,
  // before the server's threads start, so that they inherit the mask.
  sigset_t Signals;
  sigemptyset(&Signals);
  sigaddset(&Signals, SIGINT);
  sigaddset(&Signals, SIGTERM);
  pthread_sigmask(SIG_BLOCK, &Signals, nullptr);

  int Port = O.Port;
  if (Port == 0)
    Port = Server.bind_to_any_port(O.Host);
  else if (!Server.bind_to_port(O.Host, Port))
    Port = -1;
  if (Port <= 0) {
    std::string Where =
        O.Port ? O.Host + ":" + std::to_string(O.Port) : O.Host + " (any port)";
    return Fail(ExitIOError,
                "cannot listen on " + Where +
                    ": the port is in use or the address is not this "
                    "machine's; choose another with --port (0 picks a free "
                    "one) or --host");
  }
  std::string Url = formatv("http://{0}:{1}/", O.Host, Port).str();
  if (!O.PortFile.empty())
    if (Error E = writeAtomically(O.PortFile, std::to_string(Port) + "\n"))
      return Fail(ExitIOError, "--port-file: " + toString(std::move(E)));
  outs() << "autopar monitor: serving " << O.RunDir << " on " << Url << "\n";
  outs().flush();

  std::atomic<bool> Done{false}, Stopped{false};
  std::thread Waiter([&] {
    timespec Tick{0, 100 * 1000 * 1000};
    while (!Done) {
      if (sigtimedwait(&Signals, nullptr, &Tick) > 0) {
        Stopped = true;
        // stop() does nothing until listen_after_bind runs: repeat it.
        while (!Done) {
          Server.stop();
          std::this_thread::sleep_for(std::chrono::milliseconds(20));
        }
      }
    }
  });
  bool Listened = Server.listen_after_bind();
  Done = true;
  Waiter.join();
  if (!Listened && !Stopped)
    return Fail(ExitIOError, "serving on " + Url + " failed");
  return ExitSuccess;
}
