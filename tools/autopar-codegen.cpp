//===- autopar-codegen.cpp - Launch files from a plan ---------------------===//
//
// `autopar-codegen PLAN.json -o DIR` reads a plan.json, checks it and writes
// DIR/launch/{slurm.sbatch, mpirun.sh, megatron_args.txt, deepspeed.json,
// torchtitan.args, schedule.csv}, all or nothing. Exit codes as the other
// tools' (driver/OptDriver.h): 1 for a bad plan, 4 for an I/O failure. The
// work is in codegen/; this file only reads the command line.
//
//===----------------------------------------------------------------------===//

#include "codegen/LaunchFiles.h"
#include "driver/OptDriver.h"
#include "driver/OutputFiles.h"

#include "llvm/Support/CommandLine.h"
#include "llvm/Support/FileSystem.h"
#include "llvm/Support/InitLLVM.h"
#include "llvm/Support/MemoryBuffer.h"
#include "llvm/Support/Path.h"
#include "llvm/Support/WithColor.h"
#include "llvm/Support/raw_ostream.h"

using namespace autopar;
using namespace llvm;

static cl::OptionCategory Category("autopar-codegen options");

static cl::opt<std::string> PlanFile(cl::Positional, cl::Required,
                                     cl::desc("<plan.json>"),
                                     cl::cat(Category));
static cl::opt<std::string>
    OutputDir("o", cl::Required,
              cl::desc("Write the launch files into DIR/launch"),
              cl::value_desc("dir"), cl::cat(Category));

static raw_ostream &error() {
  return WithColor::error(errs(), "autopar-codegen");
}

int main(int argc, char **argv) {
  InitLLVM X(argc, argv);
  cl::HideUnrelatedOptions(Category);
  cl::ParseCommandLineOptions(argc, argv,
                              "autopar-codegen: launch files from a plan\n");

  ErrorOr<std::unique_ptr<MemoryBuffer>> Buffer =
      MemoryBuffer::getFile(PlanFile);
  if (!Buffer) {
    error() << "cannot read '" << PlanFile
            << "': " << Buffer.getError().message() << "\n";
    return ExitIOError;
  }
  Expected<PlanRecord> Record = parsePlanJSON((*Buffer)->getBuffer(), PlanFile);
  if (!Record) {
    error() << toString(Record.takeError()) << "\n";
    return ExitInvalidInput;
  }
  SmallString<128> LaunchDir(OutputDir);
  sys::path::append(LaunchDir, "launch");
  auto Files = renderLaunchFiles(*Record, LaunchDir);
  if (!Files) {
    error() << toString(Files.takeError()) << "\n";
    return ExitInvalidInput;
  }
  bool Existed = sys::fs::is_directory(LaunchDir);
  if (std::error_code EC = sys::fs::create_directories(LaunchDir)) {
    error() << "cannot create '" << LaunchDir << "': " << EC.message() << "\n";
    return ExitIOError;
  }
  if (Error E = writeOutputFiles(*Files)) {
    error() << toString(std::move(E)) << "\n";
    if (!Existed)
      sys::fs::remove(LaunchDir);
    return ExitIOError;
  }
  return ExitSuccess;
}
