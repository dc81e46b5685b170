//===- Launch.cpp - `autopar launch`: run a plan, restart on failure ------===//
//
// See Launch.h. The job's standard error passes through a pipe: each line
// is written on at once and the last ones are kept, so that a failure can
// name the rank and host mpirun (or a rank) said failed.
//
//===----------------------------------------------------------------------===//

#include "driver/Launch.h"
#include "driver/OptDriver.h"
#include "driver/OutputFiles.h"
#include "driver/PlanDriver.h"
#include "runtime/Checkpoint.h"
#include "runtime/RunMetrics.h"

#include "ir/Diagnostics.h"

#include "llvm/ADT/ScopeExit.h"
#include "llvm/ADT/SmallString.h"
#include "llvm/Support/FileSystem.h"
#include "llvm/Support/FormatVariadic.h"
#include "llvm/Support/JSON.h"
#include "llvm/Support/MemoryBuffer.h"
#include "llvm/Support/Path.h"
#include "llvm/Support/Program.h"
#include "llvm/Support/Regex.h"
#include "llvm/Support/raw_ostream.h"

#include <cerrno>
#include <chrono>
#include <csignal>
#include <cstdlib>
#include <cstring>
#include <deque>
#include <fcntl.h>
#include <map>
#include <optional>
#include <spawn.h>
#include <sys/wait.h>
#include <thread>
#include <unistd.h>

extern char **environ;

using namespace autopar;
using namespace llvm;

namespace {

/// The job being supervised, for the signal handler.
volatile pid_t ChildPid = 0;
volatile std::sig_atomic_t StopRequested = 0;

void onStop(int Signal) {
  StopRequested = Signal;
  if (ChildPid > 0)
    ::kill(ChildPid, Signal);
}

void note(const Twine &Message) {
  // One write, as printToolError: the ranks' lines share the terminal.
  std::string Line = ("autopar launch: note: " + Message + "\n").str();
  errs().flush();
  (void)!::write(2, Line.data(), Line.size());
}

/// Appends one event record (docs/Operations.md) to the metrics file; a
/// file that cannot be written loses the event, not the run.
void appendEvent(StringRef Path, StringRef Event,
                 function_ref<void(json::OStream &)> Fields) {
  Expected<MetricsFile> F = MetricsFile::open(Path);
  if (!F) {
    consumeError(F.takeError());
    return;
  }
  consumeError(F->append({formatEventRecord(Event, Fields)}));
}

/// What an attempt's standard error said about its failure.
struct FailureFacts {
  std::optional<int> Rank;
  std::string Host, What;
};

FailureFacts readFailure(const std::deque<std::string> &Lines) {
  FailureFacts F;
  Regex Heartbeat("autopar-run: error: rank ([0-9]+) \\(host ([^)]+)\\) sent "
                  "no heartbeat");
  Regex Signalled("process rank ([0-9]+) with PID [0-9]+ on node ([^ ]+) "
                  "exited on signal ([0-9]+)");
  Regex Named("Process name: \\[\\[[0-9]+,[0-9]+\\],([0-9]+)\\]");
  Regex Error("autopar-run: error: (.*)");
  SmallVector<StringRef, 4> M;
  for (const std::string &L : Lines) {
    if (Heartbeat.match(L, &M)) {
      F.Rank = std::stoi(M[1].str());
      F.Host = M[2].str();
      F.What = "no heartbeat";
      return F;
    }
  }
  for (const std::string &L : Lines) {
    if (Signalled.match(L, &M)) {
      F.Rank = std::stoi(M[1].str());
      F.Host = M[2].str();
      F.What = "killed by signal " + M[3].str();
      return F;
    }
  }
  for (const std::string &L : Lines)
    if (!F.Rank && Named.match(L, &M))
      F.Rank = std::stoi(M[1].str());
  for (const std::string &L : Lines)
    if (Error.match(L, &M)) {
      F.What = M[1].str();
      break;
    }
  return F;
}

/// The last step attempt Attempt recorded in the metrics file, and the
/// wall-clock time each step's rank-0 record was written.
struct MetricsFacts {
  int64_t LastStep = 0;
  std::map<int64_t, double> StepTimes;
};

MetricsFacts readMetrics(StringRef Path, int Attempt) {
  MetricsFacts F;
  ErrorOr<std::unique_ptr<MemoryBuffer>> B = MemoryBuffer::getFile(Path);
  if (!B)
    return F;
  SmallVector<StringRef, 0> Lines;
  (*B)->getBuffer().split(Lines, '\n', -1, false);
  for (StringRef Line : Lines) {
    Expected<json::Value> V = json::parse(Line);
    if (!V) {
      consumeError(V.takeError()); // a line being written
      continue;
    }
    const json::Object *O = V->getAsObject();
    if (!O || O->getString("kind") != StringRef("step"))
      continue;
    int64_t Step = O->getInteger("step").getValueOr(0);
    if (O->getInteger("attempt").getValueOr(0) == Attempt)
      F.LastStep = std::max(F.LastStep, Step);
    if (O->getInteger("rank").getValueOr(-1) == 0)
      F.StepTimes[Step] = O->getNumber("time").getValueOr(0);
  }
  return F;
}

/// Runs Argv with standard error through a pipe (copied on to ours, the
/// last lines kept in Tail); returns the exit status as a shell gives it
/// (128 + the signal when killed).
Expected<int> runJob(const std::vector<std::string> &Argv,
                     std::deque<std::string> &Tail) {
  int Pipe[2];
  if (::pipe2(Pipe, O_CLOEXEC) != 0)
    return createStringError(inconvertibleErrorCode(),
                             Twine("cannot make a pipe: ") +
                                 std::strerror(errno));
  posix_spawn_file_actions_t Actions;
  posix_spawn_file_actions_init(&Actions);
  posix_spawn_file_actions_adddup2(&Actions, Pipe[1], 2);
  std::vector<char *> Args;
  for (const std::string &A : Argv)
    Args.push_back(const_cast<char *>(A.c_str()));
  Args.push_back(nullptr);
  pid_t Pid = 0;
  int Code =
      ::posix_spawnp(&Pid, Args[0], &Actions, nullptr, Args.data(), environ);
  posix_spawn_file_actions_destroy(&Actions);
  ::close(Pipe[1]);
  if (Code != 0) {
    ::close(Pipe[0]);
    return createStringError(inconvertibleErrorCode(),
                             "cannot start '" + Argv[0] +
                                 "': " + std::strerror(Code));
  }
  ChildPid = Pid;
  // Tail is the reader's until it is joined.
  std::thread Reader([&] {
    std::string Pending;
    char Buffer[4096];
    for (;;) {
      ssize_t N = ::read(Pipe[0], Buffer, sizeof(Buffer));
      if (N < 0 && errno == EINTR)
        continue;
      if (N <= 0)
        break;
      Pending.append(Buffer, size_t(N));
      size_t End;
      while ((End = Pending.find('\n')) != std::string::npos) {
        std::string Line = Pending.substr(0, End + 1);
        (void)!::write(2, Line.data(), Line.size());
        Line.pop_back();
        Tail.push_back(std::move(Line));
        if (Tail.size() > 400)
          Tail.pop_front();
        Pending.erase(0, End + 1);
      }
    }
    if (!Pending.empty()) {
      (void)!::write(2, Pending.data(), Pending.size());
      Tail.push_back(Pending);
    }
    ::close(Pipe[0]);
  });
  int Status = 0;
  while (::waitpid(Pid, &Status, 0) < 0 && errno == EINTR) {
  }
  ChildPid = 0;
  Reader.join();
  if (WIFEXITED(Status))
    return WEXITSTATUS(Status);
  if (WIFSIGNALED(Status))
    return 128 + WTERMSIG(Status);
  return 255;
}

/// autopar-run beside autopar, else on the PATH.
std::string findAutoparRun(StringRef Self) {
  std::string Main =
      sys::fs::getMainExecutable(Self.str().c_str(), (void *)&findAutoparRun);
  if (!Main.empty()) {
    SmallString<256> Beside(sys::path::parent_path(Main));
    sys::path::append(Beside, "autopar-run");
    if (sys::fs::can_execute(Beside))
      return Beside.str().str();
  }
  ErrorOr<std::string> Found = sys::findProgramByName("autopar-run");
  return Found ? *Found : "autopar-run";
}

Error badOption(const Twine &Message) {
  return makeExitError(ExitBadOptions, Message);
}

/// The ranks available for an attempt (Launch.h); Wanted when nothing says.
Expected<int> countAvailableRanks(const LaunchOptions &O, int Attempt,
                                  int Wanted) {
  if (const char *Test = std::getenv("AUTOPAR_TEST_RANKS_AVAILABLE")) {
    // A:N[,A:N...]: N ranks from attempt A on (the last that began).
    SmallVector<StringRef, 2> Specs;
    StringRef(Test).split(Specs, ',');
    int Available = Wanted;
    for (StringRef Spec : Specs) {
      auto [From, Count] = Spec.split(':');
      int A = 0, N = 0;
      if (From.getAsInteger(10, A) || Count.getAsInteger(10, N) || N < 1)
        return badOption("AUTOPAR_TEST_RANKS_AVAILABLE must be "
                         "ATTEMPT:RANKS[,...], not '" +
                         Twine(Test) + "'");
      if (Attempt >= A)
        Available = N;
    }
    return Available;
  }
  if (!O.HostFile.empty()) {
    ErrorOr<std::unique_ptr<MemoryBuffer>> B =
        MemoryBuffer::getFile(O.HostFile);
    if (!B)
      return badOption("cannot read --hostfile '" + O.HostFile +
                       "': " + B.getError().message());
    // OpenMPI's format: `host [slots=N] ...`, one host per line, # comments.
    int Slots = 0;
    SmallVector<StringRef, 0> Lines;
    (*B)->getBuffer().split(Lines, '\n');
    for (StringRef Line : Lines) {
      Line = Line.split('#').first.trim();
      if (Line.empty())
        continue;
      int N = 1;
      SmallVector<StringRef, 4> Words;
      Line.split(Words, ' ', -1, false);
      for (StringRef W : Words)
        if (W.consume_front("slots=") && (W.getAsInteger(10, N) || N < 0))
          return badOption("--hostfile '" + O.HostFile + "': bad slots in '" +
                           Line + "'");
      Slots += N;
    }
    return Slots;
  }
  if (const char *Tasks = std::getenv("SLURM_NTASKS")) {
    int N = 0;
    if (!StringRef(Tasks).getAsInteger(10, N) && N > 0)
      return N;
  }
  return Wanted;
}

/// A plan folder's tp x pp and dp (plan.json's `plan`).
struct PlanShape {
  int64_t TP = 1, PP = 1, DP = 1;
};

Expected<PlanShape> readPlanShape(StringRef PlanDir) {
  SmallString<256> Path(PlanDir);
  sys::path::append(Path, "plan.json");
  ErrorOr<std::unique_ptr<MemoryBuffer>> B = MemoryBuffer::getFile(Path);
  if (!B)
    return makeExitError(ExitIOError, "cannot read '" + Path +
                                          "': " + B.getError().message());
  Expected<json::Value> V = json::parse((*B)->getBuffer());
  if (!V)
    return makeExitError(ExitInvalidInput,
                         Path + ": " + toString(V.takeError()));
  const json::Object *Root = V->getAsObject();
  const json::Object *Plan = Root ? Root->getObject("plan") : nullptr;
  if (!Plan)
    return makeExitError(ExitInvalidInput, Path + ": no 'plan' object");
  PlanShape S;
  S.TP = Plan->getInteger("tp").getValueOr(1);
  S.PP = Plan->getInteger("pp").getValueOr(1);
  S.DP = Plan->getInteger("dp").getValueOr(1);
  if (S.TP < 1 || S.PP < 1 || S.DP < 1)
    return makeExitError(ExitInvalidInput,
                         Path + ": tp, pp and dp must be positive");
  return S;
}

/// The plan an elastic attempt runs with Available ranks: the plan itself
/// when they suffice, else the plan re-targeted to the most data-parallel
/// replicas that fit (made once, in RunDir/plan-<N>ranks/).
struct ChosenPlan {
  std::string Dir;
  int Ranks = 0;
};

Expected<ChosenPlan> choosePlan(const LaunchOptions &O, const PlanShape &S,
                                StringRef RunDir, int Available) {
  if (Available >= O.Ranks)
    return ChosenPlan{O.PlanDir, O.Ranks};
  int64_t Group = S.TP * S.PP;
  for (int64_t Dp = std::min<int64_t>(Available / Group, S.DP - 1); Dp >= 1;
       --Dp) {
    SmallString<256> Dir(RunDir);
    sys::path::append(Dir, "plan-" + std::to_string(Group * Dp) + "ranks");
    SmallString<256> Stage0(Dir);
    sys::path::append(Stage0, "stage0.air");
    if (!sys::fs::exists(Stage0)) {
      note("re-targeting the plan to " + Twine(Group * Dp) + " ranks (dp=" +
           Twine(Dp) + ", the global batch kept) in '" + Dir + "'");
      if (runRetargetDriver(O.ModelFile, O.PlanDir, Dp, Group * Dp, Dir) != 0)
        continue;
    }
    return ChosenPlan{Dir.str().str(), int(Group * Dp)};
  }
  return makeExitError(
      ExitBadOptions,
      "--elastic: " + Twine(Available) +
          " ranks available; the plan needs tp x pp = " + Twine(Group) +
          " at least, and no fewer data-parallel replicas "
          "fit");
}

/// The options autopar launch gives autopar-run itself.
constexpr const char *OwnOptions[] = {"--checkpoint-dir", "--resume",
                                      "--metrics"};

Error launch(const LaunchOptions &O, int &ExitCode) {
  ExitCode = ExitSuccess;
  SmallString<256> Stage0(O.PlanDir);
  sys::path::append(Stage0, "stage0.air");
  if (!sys::fs::exists(Stage0))
    return badOption("'" + O.PlanDir +
                     "' holds no training program (stage0.air); write the "
                     "plan with `autopar MODEL -o " +
                     O.PlanDir + "` first");
  if (O.Ranks < 1)
    return badOption("--ranks must be 1 or more (the plan's GPUs)");
  if (O.MaxRestarts < 0)
    return badOption("--max-restarts must be 0 or more");
  for (const std::string &A : O.RunArgs)
    for (const char *Own : OwnOptions)
      if (StringRef(A) == Own ||
          StringRef(A).startswith((Twine(Own) + "=").str()))
        return badOption("'" + A +
                         "' after --: autopar launch sets it itself (the "
                         "run folder's checkpoints/ and metrics.jsonl)");
  std::string Launcher = O.Launcher;
  if (Launcher == "auto")
    Launcher = std::getenv("SLURM_JOB_ID") && sys::findProgramByName("srun")
                   ? "srun"
                   : "mpirun";
  if (Launcher != "mpirun" && Launcher != "srun")
    return badOption("--launcher must be mpirun, srun or auto, not '" +
                     O.Launcher + "'");
  if (O.Elastic && O.ModelFile.empty())
    return badOption("--elastic re-plans with the model: give --model "
                     "MODEL.onnx");
  PlanShape Shape;
  if (O.Elastic) {
    Expected<PlanShape> Read = readPlanShape(O.PlanDir);
    if (!Read)
      return Read.takeError();
    Shape = *Read;
    if (Shape.TP * Shape.PP * Shape.DP != O.Ranks)
      return badOption("--ranks " + Twine(O.Ranks) + ": the plan in '" +
                       O.PlanDir + "' is for tp x pp x dp = " +
                       Twine(Shape.TP * Shape.PP * Shape.DP) + " ranks");
  }
  if (!sys::findProgramByName(Launcher))
    return badOption("cannot find " + Launcher +
                     " on the PATH (OpenMPI's mpirun: scripts/install-deps.sh "
                     "installs it)");

  SmallString<256> RunDir(O.RunDir);
  if (RunDir.empty()) {
    RunDir = O.PlanDir;
    sys::path::append(RunDir, "run");
  }
  if (std::error_code EC = sys::fs::create_directories(RunDir))
    return makeExitError(ExitIOError, "cannot create the run folder '" +
                                          RunDir + "': " + EC.message());
  SmallString<256> Checkpoints(RunDir), Metrics(RunDir), RunJson(RunDir);
  sys::path::append(Checkpoints, "checkpoints");
  sys::path::append(Metrics, "metrics.jsonl");
  sys::path::append(RunJson, "run.json");
  {
    std::string Text;
    raw_string_ostream OS(Text);
    json::OStream J(OS, 2);
    J.object([&] {
      J.attribute("plan", O.PlanDir);
      J.attribute("ranks", O.Ranks);
    });
    OS << '\n';
    OS.flush();
    if (Error E = writeOutputFiles({{RunJson.str().str(), Text}}))
      return makeExitError(ExitIOError, toString(std::move(E)));
  }

  std::string Run = findAutoparRun(O.Self);
  struct sigaction Action, OldInt, OldTerm;
  std::memset(&Action, 0, sizeof(Action));
  Action.sa_handler = onStop;
  sigemptyset(&Action.sa_mask);
  ::sigaction(SIGINT, &Action, &OldInt);
  ::sigaction(SIGTERM, &Action, &OldTerm);
  auto Restore = make_scope_exit([&] {
    ::sigaction(SIGINT, &OldInt, nullptr);
    ::sigaction(SIGTERM, &OldTerm, nullptr);
  });

  ChosenPlan Current{O.PlanDir, O.Ranks};
  // The step each attempt resumes after: the latest checkpoint's.
  Expected<std::optional<int64_t>> Latest = readLatestCheckpoint(Checkpoints);
  if (!Latest)
    return makeExitError(ExitInvalidInput, toString(Latest.takeError()));
  int64_t From = Latest->value_or(0);
  for (int Attempt = 1;; ++Attempt) {
    Expected<int> Available = countAvailableRanks(O, Attempt, O.Ranks);
    if (!Available)
      return Available.takeError();
    if (O.Elastic) {
      Expected<ChosenPlan> Chosen = choosePlan(O, Shape, RunDir, *Available);
      if (!Chosen)
        return Chosen.takeError();
      if (Chosen->Ranks != Current.Ranks) {
        appendEvent(Metrics, "retarget", [&](json::OStream &J) {
          J.attribute("attempt", Attempt);
          J.attribute("available", *Available);
          J.attribute("from_ranks", Current.Ranks);
          J.attribute("ranks", Chosen->Ranks);
          J.attribute("plan", Chosen->Dir);
        });
        note("attempt " + Twine(Attempt) + ": " + Twine(*Available) +
             " ranks available; running the plan for " + Twine(Chosen->Ranks) +
             " ranks ('" + Chosen->Dir + "'), the checkpoint resharded");
      }
      Current = *Chosen;
    } else if (*Available < O.Ranks) {
      note("attempt " + Twine(Attempt) + ": only " + Twine(*Available) +
           " ranks available, the plan needs " + Twine(O.Ranks) +
           " (--elastic re-targets it)");
    }
    std::vector<std::string> Argv;
    if (Launcher == "srun") {
      Argv = {"srun", "--ntasks=" + std::to_string(Current.Ranks), "--mpi=pmix",
              "--kill-on-bad-exit=1"};
    } else {
      Argv = {"mpirun", "-np", std::to_string(Current.Ranks), "-x",
              "AUTOPAR_LAUNCH_ATTEMPT"};
      if (!O.HostFile.empty())
        Argv.insert(Argv.end(), {"--hostfile", O.HostFile});
    }
    SmallVector<StringRef, 8> Extra;
    StringRef(O.LauncherArgs).split(Extra, ' ', -1, false);
    for (StringRef E : Extra)
      Argv.push_back(E.str());
    Argv.insert(Argv.end(),
                {Run, Current.Dir, "--checkpoint-dir", Checkpoints.str().str(),
                 "--resume", "--metrics", Metrics.str().str()});
    Argv.insert(Argv.end(), O.RunArgs.begin(), O.RunArgs.end());
    ::setenv("AUTOPAR_LAUNCH_ATTEMPT", std::to_string(Attempt).c_str(), 1);
    appendEvent(Metrics, "start", [&](json::OStream &J) {
      J.attribute("attempt", Attempt);
      J.attribute("ranks", Current.Ranks);
      J.attribute("from_step", From);
    });
    note("attempt " + Twine(Attempt) + ": " + Launcher + " of " +
         Twine(Current.Ranks) + " ranks" +
         (From ? ", from the checkpoint of step " + Twine(From)
               : Twine(", from step 1")));
    auto Started = std::chrono::steady_clock::now();
    std::deque<std::string> Tail;
    Expected<int> Code = runJob(Argv, Tail);
    if (!Code)
      return makeExitError(ExitIOError, toString(Code.takeError()));
    double Took = std::chrono::duration<double>(
                      std::chrono::steady_clock::now() - Started)
                      .count();
    MetricsFacts Facts = readMetrics(Metrics, Attempt);
    if (*Code == 0 || StopRequested) {
      appendEvent(Metrics, StopRequested ? "stopped" : "finished",
                  [&](json::OStream &J) {
                    J.attribute("attempt", Attempt);
                    J.attribute("steps", Facts.LastStep);
                    J.attribute("restarts", Attempt - 1);
                  });
      if (StopRequested)
        note("stopped by signal " + Twine(int(StopRequested)) + " after step " +
             Twine(Facts.LastStep) + "; no restart");
      ExitCode = *Code;
      return Error::success();
    }
    FailureFacts Failure = readFailure(Tail);
    appendEvent(Metrics, "failure", [&](json::OStream &J) {
      J.attribute("attempt", Attempt);
      if (Failure.Rank)
        J.attribute("rank", *Failure.Rank);
      if (!Failure.Host.empty())
        J.attribute("host", Failure.Host);
      J.attribute("step", Facts.LastStep);
      J.attribute("exit_code", *Code);
      J.attribute("message", Failure.What);
      writeJsonNumber(J, "seconds", Took, "%.3f");
    });
    std::string Who =
        Failure.Rank
            ? " (rank " + std::to_string(*Failure.Rank) +
                  (Failure.Host.empty() ? "" : " on " + Failure.Host) +
                  (Failure.What.empty() ? "" : ": " + Failure.What) + ")"
            : "";
    // Bad options or a bad program fail again the same way.
    if (*Code == 1 || *Code == 2 || Attempt > O.MaxRestarts) {
      appendEvent(Metrics, "gave_up", [&](json::OStream &J) {
        J.attribute("attempt", Attempt);
        J.attribute("restarts", Attempt - 1);
        J.attribute("exit_code", *Code);
      });
      printToolError("autopar launch",
                     "attempt " + Twine(Attempt) + " failed with exit code " +
                         Twine(*Code) + Who + " after step " +
                         Twine(Facts.LastStep) + "; " +
                         (*Code == 1 || *Code == 2
                              ? Twine("the options or the program are wrong, "
                                      "so it is not restarted")
                              : "no restarts left (--max-restarts " +
                                    Twine(O.MaxRestarts) + ")"));
      ExitCode = *Code;
      return Error::success();
    }
    Expected<std::optional<int64_t>> Saved = readLatestCheckpoint(Checkpoints);
    if (!Saved)
      return makeExitError(ExitInvalidInput, toString(Saved.takeError()));
    int64_t Resume = Saved->value_or(0);
    int64_t AttemptFrom = From;
    From = Resume;
    // The time lost: since the saved step ended (the attempt's start when
    // nothing was saved in it).
    double Now = getUnixTime();
    auto SavedAt = Facts.StepTimes.find(Resume);
    double Lost = SavedAt != Facts.StepTimes.end() && Resume >= AttemptFrom
                      ? Now - SavedAt->second
                      : Took;
    appendEvent(Metrics, "restart", [&](json::OStream &J) {
      J.attribute("attempt", Attempt + 1);
      J.attribute("from_step", Resume);
      writeJsonNumber(J, "lost_s", Lost, "%.3f");
    });
    note("attempt " + Twine(Attempt) + " failed with exit code " +
         Twine(*Code) + Who + " after step " + Twine(Facts.LastStep) +
         "; restarting from the checkpoint of step " + Twine(Resume) + " (" +
         formatv("{0:f1}", Lost).str() + " s of work lost), restart " +
         Twine(Attempt) + " of " + Twine(O.MaxRestarts));
  }
}

} // namespace

int autopar::runLaunch(const LaunchOptions &O) {
  int Code = ExitSuccess;
  if (Error E = launch(O, Code))
    return reportExitError(std::move(E), "autopar launch", ExitIOError);
  return Code;
}
