//===- PassManager.h - Running pipelines of passes --------------*- C++ -*-===//
//
// A pipeline is written as text: pass arguments separated by commas, each
// with optional `{name=value ...}` options (spaces or commas between them):
//   canonicalize,partition-stages{stages=4}
// The pass manager runs the passes in order and, unless told not to,
// verifies the module after each one.
//
//===----------------------------------------------------------------------===//

#ifndef AUTOPAR_PASSES_PASSMANAGER_H
#define AUTOPAR_PASSES_PASSMANAGER_H

#include "passes/Pass.h"

#include "llvm/ADT/StringRef.h"
#include "llvm/Support/Error.h"
#include "llvm/Support/raw_ostream.h"

#include <memory>
#include <string>
#include <utility>
#include <vector>

namespace autopar {

/// One element of a pipeline as written, before passes are created.
struct PipelineElement {
  std::string Argument;
  std::vector<std::pair<std::string, std::string>> Options;
};

/// Splits pipeline text into elements; errors name the offending column.
llvm::Expected<std::vector<PipelineElement>>
parsePipelineText(llvm::StringRef Text);

struct PassManagerOptions {
  /// Verify the module after every pass.
  bool VerifyEach = true;
  /// Print the module after every pass to IRDumpStream.
  bool PrintIRAfterAll = false;
  /// Print the wall time of every pass to TimingStream after the run.
  bool TimePasses = false;
  llvm::raw_ostream *IRDumpStream = &llvm::errs();
  llvm::raw_ostream *TimingStream = &llvm::errs();
};

class PassManager {
public:
  explicit PassManager(PassManagerOptions Options = PassManagerOptions())
      : Options(Options) {}

  void addPass(std::unique_ptr<Pass> P) { Passes.push_back(std::move(P)); }
  /// Creates, configures and adds the passes of a pipeline text.
  llvm::Error addPipeline(llvm::StringRef Text);
  size_t size() const { return Passes.size(); }

  /// Runs every pass; stops at the first that fails or leaves invalid IR.
  LogicalResult run(Module &M, DiagnosticEngine &Diag);

  /// Writes the pipeline with every option's value, as it would be parsed.
  void printPipeline(llvm::raw_ostream &OS) const;

private:
  PassManagerOptions Options;
  std::vector<std::unique_ptr<Pass>> Passes;
};

} // namespace autopar

#endif // AUTOPAR_PASSES_PASSMANAGER_H
