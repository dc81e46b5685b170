//===- OptDriver.h - What autopar-opt does ----------------------*- C++ -*-===//
//
// Reads a module (.air text, or an ONNX model through the frontend), verifies
// it, runs a pipeline and writes the result. The autopar-opt tool only fills
// OptDriverOptions from its command line.
//
//===----------------------------------------------------------------------===//

#ifndef AUTOPAR_DRIVER_OPTDRIVER_H
#define AUTOPAR_DRIVER_OPTDRIVER_H

#include "frontend/Importer.h"
#include "passes/PassManager.h"

#include <string>

namespace autopar {

/// Exit codes of the tools, one per kind of failure.
enum ExitCode : int {
  ExitSuccess = 0,
  /// The input could not be parsed or does not verify.
  ExitInvalidInput = 1,
  /// An option or the pipeline text is wrong.
  ExitBadOptions = 2,
  /// A pass failed or left invalid IR.
  ExitPassFailure = 3,
  /// A file could not be read or written.
  ExitIOError = 4,
};

struct OptDriverOptions {
  /// Input file, `-` for standard input.
  std::string InputFile = "-";
  /// Output file, `-` for standard output. Written through a temporary file
  /// that is renamed into place, so a failed run leaves no partial output.
  std::string OutputFile = "-";
  /// Pipeline text, e.g. `canonicalize,partition-stages{stages=4}`.
  std::string Pipeline;
  /// Process each part of the input between lines `// -----` on its own,
  /// and separate the outputs with the same line.
  bool SplitInputFile = false;
  /// How ONNX inputs (.onnx, .pbtxt) are imported.
  ImportOptions Import;
  /// Print, parse again and print again; fail unless the bytes agree.
  bool VerifyRoundTrip = false;
  PassManagerOptions PassManager;
};

/// Runs the driver, reporting to standard error; returns an ExitCode.
int runOptDriver(const OptDriverOptions &Options);

} // namespace autopar

#endif // AUTOPAR_DRIVER_OPTDRIVER_H
