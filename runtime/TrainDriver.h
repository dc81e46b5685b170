//===- TrainDriver.h - autopar-run's training loop --------------*- C++ -*-===//
//
// `autopar-run PROGRAM.air --steps N ...` runs a one-rank training program
// (a graph after autodiff and insert-optimizer) N times. Each step binds:
//   - the token input (the graph's first integer input, [batch, seq]) to
//     the next batch x seq tokens of --data FILE (raw little-endian int32,
//     wrapping at the end) or, with --data random, to seeded uniform ids
//     below the vocabulary (the last dimension of the loss's logits);
//   - the f32[] inputs `optimizer.<name>` to the options (lr, beta1, beta2,
//     eps, weight_decay, max_grad_norm, loss_scale) and the optimizer's step
//     number (from 1; steps that loss scaling skipped do not count).
// It prints `step N loss X time_ms T tokens_per_s R` per step, where X is
// the first output (the loss, computed before the step's update), with
// ` loss_scale S` (and ` skipped`) after the loss when the program scales
// its loss (runtime/LossScaler.h).
//
// With --checkpoint-dir D it saves the rank's state (every parameter,
// optimizer moments included, the step, the optimizer's step count, the
// loss scale and the data position; Checkpoint.h)
// every --checkpoint-every K steps, after the last step, and when SIGTERM
// arrives: the step under way finishes, its checkpoint is written, and the
// run exits 0 with a note on standard error. --keep-checkpoints (2) are
// kept. --resume loads D/latest and continues from the step after it to
// --steps (the last step's number, not a count), printing what an
// uninterrupted run prints for those steps; with no D/latest it starts
// from step 1. Without --resume, a D that holds checkpoints is an error.
//
// Test hooks (environment): AUTOPAR_TEST_STEP_DELAY_MS=T sleeps T ms
// before each step; AUTOPAR_TEST_INF_GRAD_STEP=K binds step K's loss scale
// times +infinity, so that its gradients overflow (a program with loss
// scaling only); AUTOPAR_TEST_CRASH_IN_CHECKPOINT=1 (or `shard`) kills
// the process with SIGKILL halfway through writing its first checkpoint's
// shard, `rename` right after renaming that checkpoint's folder, before
// D/latest moves; AUTOPAR_TEST_OFFLOAD_FAULT=corrupt:NAME[:STEP] flips a
// byte of offloaded tensor NAME's stored block after step STEP (default 1),
// `stale:NAME[:STEP]` rewrites it as the version before, on every rank
// that holds NAME (the next fetch must fail its check).
//
// Offloaded state (docs/Offload.md): parameters placed on `host` or `nvme`
// live in an OffloadStore (host memory, or block files under
// --offload-dir DIR/rank<R>/), fetched and written back where the program
// says; a block that fails its check ends the run with
// RunOffloadCheckFailed.
//
// Multi-rank plans (a plan folder, mpirun) come with the per-rank program
// lowering (docs/Runtime.md).
//
//===----------------------------------------------------------------------===//

#ifndef AUTOPAR_RUNTIME_TRAINDRIVER_H
#define AUTOPAR_RUNTIME_TRAINDRIVER_H

#include "runtime/LrSchedule.h"

#include "llvm/Support/Error.h"

#include <cstdint>
#include <string>

namespace autopar {

struct TrainOptions {
  std::string ProgramFile;
  std::string GraphName;
  /// Steps to run (>= 1).
  int64_t Steps = 1;
  /// "random" or a token file.
  std::string Data = "random";
  uint64_t Seed = 0;
  /// The optimizer the program must have been compiled for.
  std::string Optimizer = "adamw";
  double Lr = 1e-3, Beta1 = 0.9, Beta2 = 0.999, Eps = 1e-8, WeightDecay = 0.01;
  /// --clip-grad: the global gradient norm the program's clip-gradients
  /// clips to (`optimizer.max_grad_norm`); 0: no clipping (+infinity).
  double ClipGrad = 0;
  /// --loss-scale: "dynamic", "static:S" or "none" (runtime/LossScaler.h);
  /// empty: dynamic when the program has the input `optimizer.loss_scale`
  /// (autodiff and clip-gradients with loss-scale=1), else none.
  std::string LossScale;
  /// --loss-scale-window: overflow-free steps after which a dynamic scale
  /// doubles (GradScaler's growth_interval).
  int64_t LossScaleWindow = 2000;
  /// --init-loss-scale: a dynamic scale's first value.
  double InitLossScale = 65536;
  /// The rate of each step (getSchedule, runtime/LrSchedule.h): warmup to
  /// Lr, then LrScheduleName's decay to MinLr at step LrDecaySteps (0:
  /// Steps).
  std::string LrScheduleName = "constant";
  int64_t WarmupSteps = 0, LrDecaySteps = 0;
  double MinLr = 0;
  std::string WeightsDir;
  /// Initialise every parameter from the seed, ignoring the model's data.
  bool RandomInit = false;
  int Threads = 1;
  /// The backend: cpu or cuda (runtime/BackendFactory.h).
  std::string Backend = "cpu";
  /// Seconds one communication may take before the job is aborted (0: the
  /// AUTOPAR_COMM_TIMEOUT environment variable, else 300).
  double CommTimeoutSeconds = 0;
  /// Folder of checkpoints; none when empty.
  std::string CheckpointDir;
  /// Save every this many steps (0: only after the last step and on
  /// SIGTERM).
  int64_t CheckpointEvery = 0;
  /// Also save when this many minutes have passed since the last save (or
  /// the start); rank 0's clock decides for every rank (0: never).
  double CheckpointMinutes = 0;
  /// Checkpoints kept (0: all).
  int64_t KeepCheckpoints = 2;
  /// Continue from CheckpointDir/latest.
  bool Resume = false;
  /// Write a Chrome trace of every rank's spans here (rank 0 writes it).
  std::string TracePath;
  /// Print each rank's measured peak memory next to the plan's prediction.
  bool MemoryReport = false;
  /// Print where each rank's step time goes (runtime/StepProfile.h).
  bool Profile = false;
  /// Append a JSON line per step and rank here (rank 0 writes them;
  /// docs/Operations.md); none when empty.
  std::string MetricsFile;
  /// Serve the latest step's metrics as Prometheus text on this port of
  /// rank 0 (0: any free port, announced on standard error; -1: none).
  int MetricsPort = -1;
  /// Check every point-to-point message with a CRC32C (Backend.h).
  bool VerifyTransfers = false;
  /// Send heartbeats every this many seconds and stop the job when a rank
  /// falls silent (runtime/Heartbeat.h; 0: none).
  double HeartbeatSeconds = 0;
  /// Folder of the nvme tier's blocks (each rank in DIR/rank<R>/); needed
  /// when the program places a parameter on nvme.
  std::string OffloadDir;

  llvm::Error validate() const;
  /// The schedule the options describe (a constant one for a bad name,
  /// which validate reports).
  LrSchedule getSchedule() const {
    LrSchedule S;
    S.Decay = parseLrDecay(LrScheduleName).value_or(LrDecay::Constant);
    S.Peak = Lr;
    S.Min = MinLr;
    S.WarmupSteps = WarmupSteps;
    S.DecaySteps = LrDecaySteps ? LrDecaySteps : Steps;
    return S;
  }
};

/// Runs the loop, printing to standard output and errors to standard
/// error; returns a RunExitCode (RunDriver.h).
int runTraining(const TrainOptions &Options);

} // namespace autopar

#endif // AUTOPAR_RUNTIME_TRAINDRIVER_H
