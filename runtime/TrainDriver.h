//===- TrainDriver.h - autopar-run's training loop --------------*- C++ -*-===//
//
// `autopar-run PROGRAM.air --steps N ...` runs a one-rank training program
// (a graph after autodiff and insert-optimizer) N times. Each step binds:
//   - the token input (the graph's first integer input, [batch, seq]) to
//     the next batch x seq tokens of --data FILE (raw little-endian int32,
//     wrapping at the end) or, with --data random, to seeded uniform ids
//     below the vocabulary (the last dimension of the loss's logits);
//   - the f32[] inputs `optimizer.<name>` to the options (lr, beta1, beta2,
//     eps, weight_decay) and the step number (from 1).
// It prints `step N loss X time_ms T tokens_per_s R` per step, where X is
// the first output (the loss, computed before the step's update).
// Multi-rank plans (a plan folder, mpirun) come with the per-rank program
// lowering (docs/Runtime.md).
//
//===----------------------------------------------------------------------===//

#ifndef AUTOPAR_RUNTIME_TRAINDRIVER_H
#define AUTOPAR_RUNTIME_TRAINDRIVER_H

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
  std::string WeightsDir;
  int Threads = 1;

  llvm::Error validate() const;
};

/// Runs the loop, printing to standard output and errors to standard
/// error; returns a RunExitCode (RunDriver.h).
int runTraining(const TrainOptions &Options);

} // namespace autopar

#endif // AUTOPAR_RUNTIME_TRAINDRIVER_H
