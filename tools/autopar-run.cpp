//===- autopar-run.cpp - Runs autopar programs ----------------------------===//
//
// autopar-run interprets a program (autopar IR) on the CPU backend, or with
// --backend cuda on the CUDA one (runtime/BackendFactory.h): once
// with --eval (runtime/RunDriver), or as a training loop (runtime/
// TrainDriver, with checkpoints: runtime/Checkpoint). This file only reads
// the command line.
//
//===----------------------------------------------------------------------===//

#include "runtime/RunDriver.h"
#include "runtime/TrainDriver.h"
#include "runtime/cpu/BlasCore.h"

#include "llvm/Support/CommandLine.h"
#include "llvm/Support/InitLLVM.h"

using namespace llvm;

static cl::OptionCategory Category("autopar-run options");

static cl::opt<std::string> Eval("eval",
                                 cl::desc("Run the graph of this program once"),
                                 cl::value_desc("program.air"),
                                 cl::cat(Category));
static cl::opt<std::string>
    GraphName("graph", cl::desc("The graph to run (default: the only one)"),
              cl::value_desc("name"), cl::cat(Category));
static cl::list<std::string>
    Inputs("input",
           cl::desc("A graph input as a raw little-endian file, e.g. "
                    "--input input_ids=ids.bin (one per input)"),
           cl::value_desc("name=file"), cl::cat(Category));
static cl::opt<std::string>
    OutputDir("o",
              cl::desc("Folder for the outputs (<index>.bin, outputs.json)"),
              cl::value_desc("dir"), cl::cat(Category));
static cl::opt<std::string> WeightsDir(
    "weights-dir",
    cl::desc("Folder of external parameter data (default: the program's)"),
    cl::value_desc("dir"), cl::cat(Category));
static cl::opt<std::string>
    Trace("trace",
          cl::desc("Write a Chrome trace (Perfetto) of every "
                   "rank's compute and communication to FILE"),
          cl::value_desc("FILE"), cl::cat(Category));
static cl::opt<bool> MemoryReport(
    "memory-report",
    cl::desc("Print each rank's measured peak memory next to the plan's "
             "prediction (from the plan the program records)"),
    cl::cat(Category));
static cl::opt<bool>
    Profile("profile",
            cl::desc("Print where each rank's step time goes: by kind of "
                     "kernel, by op and the heaviest nodes, with FLOPs, bytes "
                     "and rates (the mean of the steps after the first)"),
            cl::cat(Category));
static cl::opt<std::string> OffloadDir(
    "offload-dir",
    cl::desc("Folder of offloaded state placed on nvme (one block file per "
             "tensor, in DIR/rank<R>/)"),
    cl::value_desc("DIR"), cl::cat(Category));
static cl::opt<bool> RandomInit(
    "random-init",
    cl::desc("Train from scratch: initialise every parameter from the seed "
             "(normal(0, 0.02)), ignoring the model's data"),
    cl::cat(Category));
static cl::opt<uint64_t> Seed("seed",
                              cl::desc("Seed of parameters that have no data"),
                              cl::init(0), cl::cat(Category));
static cl::opt<double> CommTimeout(
    "comm-timeout",
    cl::desc("Seconds one collective or transfer may take before the job is "
             "aborted, naming the rank and the operation (default: the "
             "AUTOPAR_COMM_TIMEOUT environment variable, else 300)"),
    cl::value_desc("SECONDS"), cl::init(0), cl::cat(Category));
static cl::opt<int> Threads("threads", cl::desc("OpenBLAS threads"),
                            cl::init(1), cl::cat(Category));
static cl::opt<std::string> BackendName(
    "backend",
    cl::desc("Where to run: cpu, or cuda (a build with the CUDA toolkit, "
             "on a machine with an NVIDIA GPU)"),
    cl::value_desc("cpu|cuda"), cl::init("cpu"), cl::cat(Category));

static cl::opt<std::string> Program(cl::Positional,
                                    cl::desc("[training program.air]"),
                                    cl::cat(Category));
static cl::opt<int64_t> Steps("steps", cl::desc("Training steps"), cl::init(1),
                              cl::cat(Category));
static cl::opt<std::string>
    Data("data", cl::desc("random, or a file of little-endian int32 tokens"),
         cl::init("random"), cl::cat(Category));
static cl::opt<std::string> Optimizer("optimizer",
                                      cl::desc("adamw or sgd (as compiled)"),
                                      cl::init("adamw"), cl::cat(Category));
static cl::opt<double> Lr("lr", cl::desc("Learning rate"), cl::init(1e-3),
                          cl::cat(Category));
static cl::opt<std::string>
    LrScheduleName("lr-schedule",
                   cl::desc("After the warmup: constant, linear or cosine "
                            "decay from --lr to --min-lr"),
                   cl::init("constant"), cl::cat(Category));
static cl::opt<int64_t> WarmupSteps(
    "warmup-steps",
    cl::desc("Steps over which the rate rises linearly to --lr (0: none)"),
    cl::init(0), cl::cat(Category));
static cl::opt<double> MinLr("min-lr", cl::desc("The rate the decay ends at"),
                             cl::init(0.0), cl::cat(Category));
static cl::opt<int64_t> LrDecaySteps(
    "lr-decay-steps",
    cl::desc("The step the decay ends at, warmup included (0: --steps)"),
    cl::init(0), cl::cat(Category));
static cl::opt<double> Beta1("beta1", cl::desc("AdamW beta1"), cl::init(0.9),
                             cl::cat(Category));
static cl::opt<double> Beta2("beta2", cl::desc("AdamW beta2"), cl::init(0.999),
                             cl::cat(Category));
static cl::opt<double> Eps("eps", cl::desc("AdamW epsilon"), cl::init(1e-8),
                           cl::cat(Category));
static cl::opt<double> WeightDecay("weight-decay", cl::desc("Weight decay"),
                                   cl::init(0.01), cl::cat(Category));
static cl::opt<double>
    ClipGrad("clip-grad",
             cl::desc("Clip the gradients to this global L2 norm, as "
                      "torch's clip_grad_norm_ (0: no clipping)"),
             cl::value_desc("max-norm"), cl::init(0), cl::cat(Category));
static cl::opt<std::string> LossScale(
    "loss-scale",
    cl::desc("The loss scale of a program that scales its loss (fp16 plans): "
             "dynamic (GradScaler's; the default for such a program), "
             "static:S or none"),
    cl::value_desc("dynamic|static:S|none"), cl::cat(Category));
static cl::opt<int64_t> LossScaleWindow(
    "loss-scale-window",
    cl::desc("Steps without an overflow after which the dynamic loss scale "
             "doubles (GradScaler's growth_interval)"),
    cl::init(2000), cl::cat(Category));
static cl::opt<double>
    InitLossScale("init-loss-scale",
                  cl::desc("The dynamic loss scale's first value"),
                  cl::init(65536), cl::cat(Category));
static cl::opt<std::string> CheckpointDir(
    "checkpoint-dir",
    cl::desc("Save checkpoints into this folder (step_<N>/, latest)"),
    cl::value_desc("dir"), cl::cat(Category));
static cl::opt<int64_t> CheckpointEvery(
    "checkpoint-every",
    cl::desc("Save a checkpoint every N steps (0: only after the last step "
             "and on SIGTERM)"),
    cl::init(0), cl::cat(Category));
static cl::opt<double> CheckpointMinutes(
    "checkpoint-minutes",
    cl::desc("Also save a checkpoint when this many minutes have passed "
             "since the last one (0: never)"),
    cl::init(0), cl::cat(Category));
static cl::opt<int64_t>
    KeepCheckpoints("keep-checkpoints",
                    cl::desc("Checkpoints to keep (0: all)"), cl::init(2),
                    cl::cat(Category));
static cl::opt<std::string>
    Metrics("metrics",
            cl::desc("Append a JSON line per step and rank to this file "
                     "(docs/Operations.md)"),
            cl::value_desc("file.jsonl"), cl::cat(Category));
static cl::opt<int> MetricsPort(
    "metrics-port",
    cl::desc("Serve the latest step's metrics as Prometheus text on this "
             "port of rank 0 (0: any free port; -1: none)"),
    cl::init(-1), cl::cat(Category));
static cl::opt<bool> VerifyTransfers(
    "verify-transfers",
    cl::desc("Check every point-to-point message (pipeline activations) "
             "with a CRC32C"),
    cl::cat(Category));
static cl::opt<double> Heartbeat(
    "heartbeat",
    cl::desc("Send heartbeats every S seconds and stop the job when a rank "
             "falls silent (0: none)"),
    cl::value_desc("seconds"), cl::init(0), cl::cat(Category));
static cl::opt<bool>
    Resume("resume",
           cl::desc("Continue from the checkpoint-dir's latest checkpoint "
                    "up to --steps"),
           cl::cat(Category));

int main(int argc, char **argv) {
  // OpenBLAS's fastest kernels for this CPU and short spinning of its
  // threads, before anything starts.
  autopar::restartWithBlasSettings(argv);
  InitLLVM X(argc, argv);
  cl::HideUnrelatedOptions(Category);
  cl::ParseCommandLineOptions(argc, argv, "autopar program runner\n");

  // Training takes a program; --eval, or -o without a program, is a run.
  if (Eval.empty() && (!Program.empty() || OutputDir.empty())) {
    autopar::TrainOptions T;
    T.ProgramFile = Program;
    T.GraphName = GraphName;
    T.Steps = Steps;
    T.Data = Data;
    T.Seed = Seed;
    T.Optimizer = Optimizer;
    T.Lr = Lr;
    T.LrScheduleName = LrScheduleName;
    T.WarmupSteps = WarmupSteps;
    T.MinLr = MinLr;
    T.LrDecaySteps = LrDecaySteps;
    T.Beta1 = Beta1;
    T.Beta2 = Beta2;
    T.Eps = Eps;
    T.WeightDecay = WeightDecay;
    T.ClipGrad = ClipGrad;
    T.LossScale = LossScale;
    T.LossScaleWindow = LossScaleWindow;
    T.InitLossScale = InitLossScale;
    T.WeightsDir = WeightsDir;
    T.RandomInit = RandomInit;
    T.TracePath = Trace;
    T.MemoryReport = MemoryReport;
    T.Profile = Profile;
    T.OffloadDir = OffloadDir;
    T.Threads = Threads;
    T.Backend = BackendName;
    T.CommTimeoutSeconds = CommTimeout;
    T.CheckpointDir = CheckpointDir;
    T.CheckpointEvery = CheckpointEvery;
    T.CheckpointMinutes = CheckpointMinutes;
    T.KeepCheckpoints = KeepCheckpoints;
    T.Resume = Resume;
    T.MetricsFile = Metrics;
    T.MetricsPort = MetricsPort;
    T.HeartbeatSeconds = Heartbeat;
    T.VerifyTransfers = VerifyTransfers;
    return autopar::runTraining(T);
  }
  autopar::RunDriverOptions Options;
  Options.ProgramFile = Eval;
  Options.GraphName = GraphName;
  Options.Inputs.assign(Inputs.begin(), Inputs.end());
  Options.OutputDir = OutputDir;
  Options.WeightsDir = WeightsDir;
  Options.InitSeed = Seed;
  Options.Threads = Threads;
  Options.Backend = BackendName;
  Options.CommTimeoutSeconds = CommTimeout;
  return autopar::runRunDriver(Options);
}
