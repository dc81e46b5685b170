//===- OptDriver.cpp - What autopar-opt does ------------------------------===//

#include "driver/OptDriver.h"
#include "driver/OutputFiles.h"

#include "ir/Graph.h"
#include "ir/Parser.h"
#include "ir/Printer.h"
#include "ir/Verifier.h"

#include "llvm/Support/FileSystem.h"
#include "llvm/Support/MemoryBuffer.h"
#include "llvm/Support/SourceMgr.h"
#include "llvm/Support/WithColor.h"

using namespace autopar;
using namespace llvm;

/// Separates the chunks of --split-input-file input and output.
static constexpr StringRef SplitMarker = "// -----";

static raw_ostream &error() { return WithColor::error(errs(), "autopar-opt"); }

/// Writes Text to Path (or stdout for `-`) through a temporary file renamed
/// into place.
static int writeOutput(StringRef Path, StringRef Text) {
  if (Error E = writeOutputFiles({{Path.str(), Text.str()}})) {
    error() << toString(std::move(E)) << '\n';
    return ExitIOError;
  }
  return ExitSuccess;
}

static std::string printToString(const Module &M) {
  std::string Text;
  raw_string_ostream OS(Text);
  printModule(OS, M);
  return OS.str();
}

/// Parses Text as a second buffer and checks that it prints back to Text.
static bool checkRoundTrip(StringRef Text, StringRef InputName) {
  SourceMgr SM;
  SM.AddNewSourceBuffer(
      MemoryBuffer::getMemBufferCopy(Text, InputName.str() + " (printed)"),
      SMLoc());
  DiagnosticEngine Diag(&SM, InputName);
  std::unique_ptr<Module> M = parseModule(SM, Diag);
  if (!M) {
    error() << "the printed module does not parse again\n";
    return false;
  }
  if (printToString(*M) != Text) {
    error() << "printing the re-parsed module gives different text\n";
    return false;
  }
  return true;
}

/// Runs the pipeline on a verified module and prints it into Text; returns
/// an ExitCode.
static int transformAndPrint(Module &M, DiagnosticEngine &Diag,
                             const OptDriverOptions &Options,
                             std::string &Text) {
  PassManager PM(Options.PassManager);
  // The pipeline text was checked before any input was read.
  cantFail(PM.addPipeline(Options.Pipeline));
  if (failed(PM.run(M, Diag)))
    return ExitPassFailure;
  Text = printToString(M);
  if (Options.VerifyRoundTrip && !checkRoundTrip(Text, Options.InputFile))
    return ExitInvalidInput;
  return ExitSuccess;
}

/// Parses, verifies, transforms and prints one buffer; returns an ExitCode.
static int processBuffer(std::unique_ptr<MemoryBuffer> Buffer,
                         const OptDriverOptions &Options, std::string &Text) {
  SourceMgr SM;
  SM.AddNewSourceBuffer(std::move(Buffer), SMLoc());
  DiagnosticEngine Diag(&SM, Options.InputFile);
  std::unique_ptr<Module> M = parseModule(SM, Diag);
  if (!M || failed(verifyModule(*M, Diag)))
    return ExitInvalidInput;
  return transformAndPrint(*M, Diag, Options, Text);
}

/// Imports an ONNX model, transforms and prints it; returns an ExitCode.
static int processOnnxModel(const OptDriverOptions &Options) {
  if (Error E = Options.Import.validate()) {
    error() << toString(std::move(E)) << '\n';
    return ExitBadOptions;
  }
  if (!sys::fs::exists(Options.InputFile)) {
    error() << "cannot read '" << Options.InputFile
            << "': no such file or directory\n";
    return ExitIOError;
  }
  DiagnosticEngine Diag(nullptr, Options.InputFile);
  std::unique_ptr<Module> M =
      importOnnxModel(Options.InputFile, Options.Import, Diag);
  if (!M)
    return ExitInvalidInput;
  std::string Text;
  int Code = transformAndPrint(*M, Diag, Options, Text);
  return Code != ExitSuccess ? Code : writeOutput(Options.OutputFile, Text);
}

/// Splits Input at lines that are exactly `// -----`. Each chunk is padded
/// with the newlines before it, so that diagnostics give the line numbers of
/// the whole file.
static std::vector<std::string> splitInput(StringRef Input) {
  std::vector<std::string> Chunks;
  std::string Current;
  unsigned Line = 0, ChunkStartLine = 0;
  while (!Input.empty()) {
    auto [LineText, Rest] = Input.split('\n');
    bool HasNewline = LineText.size() != Input.size();
    Input = Rest;
    ++Line;
    if (LineText.rtrim() == SplitMarker) {
      Chunks.push_back(std::string(ChunkStartLine, '\n') + Current);
      Current.clear();
      ChunkStartLine = Line;
      continue;
    }
    Current += LineText;
    if (HasNewline)
      Current += '\n';
  }
  Chunks.push_back(std::string(ChunkStartLine, '\n') + Current);
  return Chunks;
}

int autopar::runOptDriver(const OptDriverOptions &Options) {
  {
    // Check the pipeline before reading anything.
    PassManager PM(Options.PassManager);
    if (Error E = PM.addPipeline(Options.Pipeline)) {
      error() << "--passes: " << toString(std::move(E)) << '\n';
      return ExitBadOptions;
    }
  }

  if (isOnnxModelPath(Options.InputFile) && !Options.SplitInputFile)
    return processOnnxModel(Options);

  ErrorOr<std::unique_ptr<MemoryBuffer>> Buffer =
      MemoryBuffer::getFileOrSTDIN(Options.InputFile);
  if (!Buffer) {
    error() << "cannot read '" << Options.InputFile
            << "': " << Buffer.getError().message() << '\n';
    return ExitIOError;
  }
  if (!Options.SplitInputFile) {
    std::string Text;
    int Code = processBuffer(std::move(*Buffer), Options, Text);
    return Code != ExitSuccess ? Code : writeOutput(Options.OutputFile, Text);
  }

  // Every chunk is processed, whatever the others do; the output holds the
  // chunks that succeeded, and the exit code is the first failure's.
  int FirstFailure = ExitSuccess;
  std::string Output;
  bool First = true;
  for (const std::string &Chunk : splitInput((*Buffer)->getBuffer())) {
    std::string Text;
    int Code = processBuffer(
        MemoryBuffer::getMemBufferCopy(Chunk, (*Buffer)->getBufferIdentifier()),
        Options, Text);
    if (Code != ExitSuccess) {
      if (FirstFailure == ExitSuccess)
        FirstFailure = Code;
      continue;
    }
    if (!First)
      Output += SplitMarker.str() + "\n";
    First = false;
    Output += Text;
  }
  if (FirstFailure != ExitSuccess) {
    // Standard output shows what succeeded; a file is written only whole.
    if (Options.OutputFile == "-")
      outs() << Output;
    return FirstFailure;
  }
  return writeOutput(Options.OutputFile, Output);
}
