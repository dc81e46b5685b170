//===- Launch.h - autopar launch: run, restart on failure -------*- C++ -*-===//
//
// `autopar launch PLAN_DIR --ranks N [--max-restarts K] -- OPTIONS` runs
// the plan's programs under OpenMPI's mpirun (or srun inside a Slurm
// allocation), with autopar-run's OPTIONS plus the run folder's checkpoints,
// --resume and --metrics (docs/Operations.md "Restarts"). When an attempt
// fails it is logged (standard error and an event record in the metrics
// file: the exit code, and the rank and host mpirun or the ranks named),
// and the job starts again from the latest checkpoint, up to K times. The
// placement is the launcher's; autopar only supervises.
//
// Attempt A runs with AUTOPAR_LAUNCH_ATTEMPT=A (1, 2, ...). SIGINT and
// SIGTERM are passed on to the job (whose ranks checkpoint and stop) and
// end the launch without a restart.
//
// Elastic (--elastic --model MODEL): before each attempt the ranks
// available are counted (the host file's slots, Slurm's SLURM_NTASKS, or
// AUTOPAR_TEST_RANKS_AVAILABLE=A:N[,A:N...], N ranks from attempt A on, for
// tests).
// With fewer than the plan needs, the plan is re-targeted to the most
// data-parallel replicas that fit (runRetargetDriver: the global batch
// kept, more micro-batches per replica) into RUN_DIR/plan-<N>ranks/, and the
// ranks load the checkpoint resharded (autopar-run does, when a checkpoint
// was written by another number of ranks); with enough ranks again, the
// original plan runs again.
//
//===----------------------------------------------------------------------===//

#ifndef AUTOPAR_DRIVER_LAUNCH_H
#define AUTOPAR_DRIVER_LAUNCH_H

#include <string>
#include <vector>

namespace autopar {

struct LaunchOptions {
  std::string PlanDir;
  /// The run folder (default PLAN_DIR/run).
  std::string RunDir;
  int Ranks = 0;
  int MaxRestarts = 3;
  /// mpirun, srun, or auto (srun inside a Slurm allocation, else mpirun).
  std::string Launcher = "auto";
  /// Extra arguments of the launcher, split at spaces.
  std::string LauncherArgs;
  /// autopar-run's options (after `--`).
  std::vector<std::string> RunArgs;
  /// The autopar executable (argv[0]): autopar-run is found beside it.
  std::string Self;
  /// Re-target the plan by data parallelism when fewer ranks are available
  /// (and back when they are again); needs the model (ModelFile).
  bool Elastic = false;
  std::string ModelFile;
  /// mpirun's host file: its slots are the ranks available, read again
  /// before each attempt (inside Slurm: SLURM_NTASKS).
  std::string HostFile;
};

/// Runs the job; returns 0 once it finished, else the exit code of its last
/// attempt, or ExitBadOptions / ExitIOError (driver/OptDriver.h) when it
/// could not start.
int runLaunch(const LaunchOptions &O);

} // namespace autopar

#endif // AUTOPAR_DRIVER_LAUNCH_H
