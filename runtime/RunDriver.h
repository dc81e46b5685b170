//===- RunDriver.h - What autopar-run does ----------------------*- C++ -*-===//
//
// `autopar-run --eval PROGRAM.air --input NAME=FILE ... -o DIR` parses and
// verifies a program, reads each graph input from a raw little-endian file
// (its size must be the input's), runs the graph once on the CPU backend,
// and writes each output as DIR/<index>.bin (raw little-endian) with
// DIR/outputs.json naming them: {"outputs": [{"index", "name", "file",
// "dtype", "shape"}]}. Files are written to temporaries and renamed into
// place only when all of them were written. The autopar-run tool only
// fills RunDriverOptions from its command line.
//
//===----------------------------------------------------------------------===//

#ifndef AUTOPAR_RUNTIME_RUNDRIVER_H
#define AUTOPAR_RUNTIME_RUNDRIVER_H

#include "llvm/Support/Error.h"

#include <cstdint>
#include <string>
#include <vector>

namespace autopar {

/// Exit codes of autopar-run, numbered as autopar-opt's.
enum RunExitCode : int {
  RunSuccess = 0,
  /// The program or an input file is invalid (parse, verify, non-static
  /// shapes, wrong input size).
  RunInvalidInput = 1,
  /// An option is missing or wrong.
  RunBadOptions = 2,
  /// A node failed while running (no kernel, a kernel's error).
  RunFailure = 3,
  /// A file could not be read or written (program, inputs, weights,
  /// outputs).
  RunIOError = 4,
  /// An offloaded block failed its check (stale version or CRC32C): the
  /// offloaded state is lost (runtime/OffloadStore.h).
  RunOffloadCheckFailed = 5,
  /// A rank fell silent: no heartbeat for 1.5 periods (runtime/Heartbeat.h).
  RunHeartbeatLost = 6,
};

struct RunDriverOptions {
  /// The program to run once (--eval).
  std::string ProgramFile;
  /// The graph to run; may be empty when the program has one graph.
  std::string GraphName;
  /// `NAME=FILE` per graph input (NAME without `%`).
  std::vector<std::string> Inputs;
  /// Folder the outputs are written to; created when missing.
  std::string OutputDir;
  /// Folder of external parameter data; the program's folder when empty.
  std::string WeightsDir;
  /// Seed of parameters without data (runtime/ParamInit.h).
  uint64_t InitSeed = 0;
  /// OpenBLAS threads.
  int Threads = 1;
  /// The backend: cpu or cuda (runtime/BackendFactory.h).
  std::string Backend = "cpu";
  /// Seconds one communication may take (0: AUTOPAR_COMM_TIMEOUT, else
  /// 300).
  double CommTimeoutSeconds = 0;

  /// An error for missing or malformed options.
  llvm::Error validate() const;
};

/// Runs the driver, reporting to standard error; returns a RunExitCode.
int runRunDriver(const RunDriverOptions &Options);

} // namespace autopar

#endif // AUTOPAR_RUNTIME_RUNDRIVER_H
