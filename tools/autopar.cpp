//===- autopar.cpp - Plans the parallel training of a model ---------------===//
//
// `autopar MODEL.onnx --gpus N [-o DIR]` finds the best tensor, pipeline and
// data parallel plan for MODEL on N GPUs and writes it; `autopar check MODEL
// DIR` says whether the plan in DIR still is what MODEL gives; `autopar
// monitor RUN_DIR` serves a run's live panel. All the work is in
// driver/PlanDriver and monitor/; this file only reads the command line.
//
//===----------------------------------------------------------------------===//

#include "driver/Launch.h"
#include "driver/OptDriver.h"
#include "driver/PlanDriver.h"
#include "ir/Plan.h"
#include "monitor/MonitorServer.h"

#include "llvm/Support/CommandLine.h"
#include "llvm/Support/InitLLVM.h"
#include "llvm/Support/WithColor.h"
#include "llvm/Support/raw_ostream.h"

using namespace llvm;

static cl::OptionCategory Category("autopar options");

static cl::list<std::string>
    Positionals(cl::Positional,
                cl::desc("<model .onnx or .pbtxt> | check <model> <plan dir> "
                         "| explain <model> <plan dir> | monitor <run dir>"),
                cl::cat(Category));
static cl::opt<int64_t> Gpus("gpus", cl::desc("Number of GPUs"),
                             cl::value_desc("N"), cl::init(0),
                             cl::cat(Category));
static cl::opt<std::string>
    Gpu("gpu",
        cl::desc("Device: a100-40gb, a100-80gb, h100, h200, cpu (default "
                 "a100-80gb)"),
        cl::value_desc("name"), cl::init("a100-80gb"), cl::cat(Category));
static cl::opt<int64_t>
    GpusPerNode("gpus-per-node",
                cl::desc("GPUs per node (default: the device's usual node)"),
                cl::value_desc("K"), cl::init(0), cl::cat(Category));
static cl::opt<std::string>
    ClusterFile("cluster",
                cl::desc("Cluster description file, instead of --gpu"),
                cl::value_desc("file.json"), cl::cat(Category));
static cl::opt<std::string> CalibrationFile(
    "calibration",
    cl::desc("Measured GEMM efficiencies of the device (a calibration file "
             "from bench/), replacing the model's curves"),
    cl::value_desc("file.json"), cl::cat(Category));
static cl::opt<int64_t>
    GlobalBatch("global-batch",
                cl::desc("Samples per training step (default: one per GPU)"),
                cl::value_desc("N"), cl::init(0), cl::cat(Category));
// The keys come from the knob table (ir/PlanKnobs.def).
static const std::string FixHelp =
    "Pin choices, e.g. tp=8,pp=4,mbs=1,schedule=interleaved; keys: " +
    autopar::getPlanKnobKeys();
static cl::opt<std::string> Fix("fix", cl::desc(FixHelp),
                                cl::value_desc("key=value,..."),
                                cl::cat(Category));
static cl::opt<unsigned> Top("top",
                             cl::desc("Show the K best plans (default 1)"),
                             cl::value_desc("K"), cl::init(1),
                             cl::cat(Category));
static cl::opt<unsigned>
    Threads("threads",
            cl::desc("Search threads (default 0: the machine's cores, at "
                     "most 8; the result does not depend on it)"),
            cl::value_desc("N"), cl::init(0), cl::cat(Category));
static cl::opt<bool> ForwardPrograms(
    "forward-programs",
    cl::desc("With -o, also write each pipeline stage's forward program "
             "(forward<S>.air) for autopar-run --eval DIR"),
    cl::cat(Category));
static cl::opt<bool>
    TpAcrossNodes("tp-across-nodes",
                  cl::desc("Allow tensor-parallel groups larger than a node"),
                  cl::cat(Category));
static cl::opt<std::string> Format("format",
                                   cl::desc("Summary format: text or json"),
                                   cl::value_desc("format"), cl::init("text"),
                                   cl::cat(Category));
static cl::opt<std::string>
    GivenPlan("plan",
              cl::desc("Evaluate this plan.json (or plan folder) instead of "
                       "searching; with monitor: the run's plan, instead of "
                       "the one its run.json names"),
              cl::value_desc("file"), cl::cat(Category));
static cl::opt<std::string>
    WhatIf("what-if",
           cl::desc("With explain: change the plan first, e.g. tp=4,pp=8 "
                    "(the --fix keys)"),
           cl::value_desc("k=v,..."), cl::cat(Category));
static cl::opt<int>
    Port("port",
         cl::desc("With monitor: the port to serve the panel on (default "
                  "8080; 0 picks a free one)"),
         cl::value_desc("P"), cl::init(8080), cl::cat(Category));
static cl::opt<std::string>
    Host("host",
         cl::desc("With monitor: the address to listen on (default "
                  "127.0.0.1)"),
         cl::value_desc("address"), cl::init("127.0.0.1"), cl::cat(Category));
static cl::opt<std::string>
    PortFile("port-file",
             cl::desc("With monitor: write the port to this file once "
                      "serving"),
             cl::value_desc("file"), cl::cat(Category));
static cl::opt<unsigned>
    ScaleDp("scale-dp",
            cl::desc("Run the plan on K times the GPUs by data parallelism "
                     "(K times the global batch), without a new search"),
            cl::value_desc("K"), cl::init(1), cl::cat(Category));
static cl::opt<std::string>
    OutputDir("o", cl::desc("Write plan.air and plan.json into this folder"),
              cl::value_desc("dir"), cl::cat(Category));
static cl::list<std::string>
    DimBindings("dim",
                cl::desc("Size of a symbolic dimension other than the batch, "
                         "e.g. --dim sequence=2048 (repeatable)"),
                cl::value_desc("name=size"), cl::cat(Category));
static cl::list<std::string> FreezePatterns(
    "freeze",
    cl::desc("Do not train the parameters whose ONNX initializer names "
             "contain a match of this regular expression (anchor with ^ "
             "and $ for whole names), e.g. --freeze rotary_emb (repeatable)"),
    cl::value_desc("regex"), cl::cat(Category));
static cl::opt<std::string>
    BatchDim("batch-dim",
             cl::desc("The symbol that is the batch dimension, or INPUT:AXIS "
                      "for an input's dimension, which may be static (found "
                      "from the inputs by default)"),
             cl::value_desc("name|input:axis"), cl::cat(Category));

static cl::opt<int> Ranks("ranks",
                          cl::desc("With launch: the job's ranks (the plan's "
                                   "GPUs)"),
                          cl::value_desc("N"), cl::init(0), cl::cat(Category));
static cl::opt<int> MaxRestarts(
    "max-restarts",
    cl::desc("With launch: restart a failed job from its latest checkpoint "
             "up to K times"),
    cl::value_desc("K"), cl::init(3), cl::cat(Category));
static cl::opt<std::string>
    RunDir("run-dir",
           cl::desc("With launch: the run folder (checkpoints, metrics; "
                    "default PLAN_DIR/run)"),
           cl::value_desc("dir"), cl::cat(Category));
static cl::opt<std::string>
    Launcher("launcher",
             cl::desc("With launch: mpirun, srun or auto (srun inside a "
                      "Slurm allocation)"),
             cl::init("auto"), cl::cat(Category));
static cl::opt<bool>
    Elastic("elastic",
            cl::desc("With launch: when fewer ranks are available, re-target "
                     "the plan by data parallelism (needs --model)"),
            cl::cat(Category));
static cl::opt<std::string>
    Model("model",
          cl::desc("With launch --elastic: the model the plan was made from"),
          cl::value_desc("model.onnx"), cl::cat(Category));
static cl::opt<std::string>
    HostFile("hostfile",
             cl::desc("With launch: mpirun's host file; its slots are the "
                      "ranks available, read before each attempt"),
             cl::value_desc("file"), cl::cat(Category));
static cl::opt<std::string> LauncherArgs(
    "launcher-args",
    cl::desc("With launch: more arguments for mpirun or srun, e.g. "
             "--launcher-args=--oversubscribe"),
    cl::value_desc("args"), cl::cat(Category));

int main(int argc, char **argv) {
  InitLLVM X(argc, argv);
  cl::HideUnrelatedOptions(Category);
  cl::ParseCommandLineOptions(argc, argv,
                              "autopar: plans parallel training of a model\n");
  // `autopar check MODEL DIR`: re-derive the plan in DIR and compare.
  if (!Positionals.empty() && Positionals[0] == "check") {
    if (Positionals.size() != 3) {
      WithColor::error(errs(), "autopar")
          << "usage: autopar check MODEL.onnx PLAN_DIR\n";
      return autopar::ExitBadOptions;
    }
    return autopar::runCheckDriver(Positionals[1], Positionals[2], Threads);
  }
  if (!Positionals.empty() && Positionals[0] == "explain") {
    if (Positionals.size() != 3) {
      WithColor::error(errs(), "autopar")
          << "usage: autopar explain MODEL.onnx PLAN_DIR [--what-if "
             "k=v,...]\n";
      return autopar::ExitBadOptions;
    }
    return autopar::runExplainDriver(Positionals[1], Positionals[2], WhatIf);
  }
  // `autopar launch PLAN_DIR --ranks N -- OPTIONS`: autopar-run's options
  // follow `--`, which makes them positional here.
  if (!Positionals.empty() && Positionals[0] == "launch") {
    if (Positionals.size() < 2) {
      WithColor::error(errs(), "autopar")
          << "usage: autopar launch PLAN_DIR --ranks N [--max-restarts K] "
             "[--run-dir DIR] -- AUTOPAR_RUN_OPTIONS\n";
      return autopar::ExitBadOptions;
    }
    autopar::LaunchOptions Launch;
    Launch.PlanDir = Positionals[1];
    Launch.RunDir = RunDir;
    Launch.Ranks = Ranks;
    Launch.MaxRestarts = MaxRestarts;
    Launch.Launcher = Launcher;
    Launch.LauncherArgs = LauncherArgs;
    Launch.RunArgs.assign(Positionals.begin() + 2, Positionals.end());
    Launch.Self = argv[0];
    Launch.Elastic = Elastic;
    Launch.ModelFile = Model;
    Launch.HostFile = HostFile;
    return autopar::runLaunch(Launch);
  }
  if (!Positionals.empty() && Positionals[0] == "monitor") {
    if (Positionals.size() != 2) {
      WithColor::error(errs(), "autopar")
          << "usage: autopar monitor RUN_DIR [--port P] [--plan PLAN_DIR] "
             "[--port-file FILE]\n";
      return autopar::ExitBadOptions;
    }
    autopar::MonitorOptions Monitor;
    Monitor.RunDir = Positionals[1];
    Monitor.PlanDir = GivenPlan;
    Monitor.Host = Host;
    Monitor.Port = Port;
    Monitor.PortFile = PortFile;
    return autopar::runMonitor(Monitor);
  }
  if (Positionals.size() > 1) {
    WithColor::error(errs(), "autopar")
        << "one model expected, got " << Positionals.size()
        << " arguments; usage: autopar MODEL.onnx --gpus N\n";
    return autopar::ExitBadOptions;
  }
  autopar::PlanDriverOptions Options;
  Options.ModelFile = Positionals.empty() ? "" : Positionals[0];
  Options.Gpus = Gpus;
  Options.Gpu = Gpu;
  Options.GpusPerNode = GpusPerNode;
  Options.ClusterFile = ClusterFile;
  Options.CalibrationFile = CalibrationFile;
  Options.GlobalBatch = GlobalBatch;
  Options.Fix = Fix;
  Options.TopK = Top;
  Options.Threads = Threads;
  Options.TpAcrossNodes = TpAcrossNodes;
  Options.Format = Format;
  Options.OutputDir = OutputDir;
  Options.ForwardPrograms = ForwardPrograms;
  Options.GivenPlan = GivenPlan;
  Options.ScaleDp = ScaleDp;
  for (const std::string &Binding : DimBindings)
    if (Error E = Options.Import.addDimBinding(Binding)) {
      WithColor::error(errs(), "autopar") << toString(std::move(E)) << '\n';
      return autopar::ExitBadOptions;
    }
  for (const std::string &Pattern : FreezePatterns)
    if (Error E = Options.Import.addFreeze(Pattern)) {
      WithColor::error(errs(), "autopar") << toString(std::move(E)) << '\n';
      return autopar::ExitBadOptions;
    }
  Options.Import.BatchDim = BatchDim;
  return autopar::runPlanDriver(Options);
}
