//===- autopar-opt.cpp - Runs passes on autopar IR ------------------------===//
//
// autopar-opt reads a module in the .air text form, runs a pipeline of
// registered passes and prints the result. All the work is in
// passes/OptDriver; this file only reads the command line.
//
//===----------------------------------------------------------------------===//

#include "driver/OptDriver.h"
#include "passes/PassRegistry.h"
#include "test/lib/TestPasses.h"

#include "llvm/Support/CommandLine.h"
#include "llvm/Support/InitLLVM.h"
#include "llvm/Support/WithColor.h"
#include "llvm/Support/raw_ostream.h"

using namespace llvm;

static cl::OptionCategory Category("autopar-opt options");

static cl::opt<std::string> InputFile(cl::Positional,
                                      cl::desc("<input .air, .onnx or .pbtxt>"),
                                      cl::init("-"), cl::cat(Category));
static cl::opt<std::string> OutputFile("o", cl::desc("Output file"),
                                       cl::value_desc("file"), cl::init("-"),
                                       cl::cat(Category));
static cl::opt<std::string>
    Pipeline("passes",
             cl::desc("Pipeline to run, e.g. 'canonicalize{dce=false}'"),
             cl::value_desc("pipeline"), cl::cat(Category));
static cl::opt<bool> PrintIRAfterAll("print-ir-after-all",
                                     cl::desc("Print the IR after each pass"),
                                     cl::cat(Category));
static cl::opt<bool> TimePasses("time-passes",
                                cl::desc("Report the time of each pass"),
                                cl::cat(Category));
static cl::opt<bool> VerifyEach("verify-each",
                                cl::desc("Verify the IR after each pass"),
                                cl::init(true), cl::cat(Category));
static cl::list<std::string>
    DimBindings("dim",
                cl::desc("Size of a symbolic dimension of an ONNX model's "
                         "inputs, e.g. --dim batch=8 (repeatable)"),
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
static cl::opt<bool> LoadWeights(
    "load-weights",
    cl::desc("Read the data of an ONNX model's inline initializers into its "
             "parameters (external data must then exist)"),
    cl::cat(Category));
static cl::opt<bool> SplitInputFile(
    "split-input-file",
    cl::desc("Process each part of the input between '// -----' lines on its "
             "own"),
    cl::cat(Category));
static cl::opt<bool>
    VerifyRoundTrip("verify-roundtrip",
                    cl::desc("Check that the output parses and prints back "
                             "to the same bytes"),
                    cl::cat(Category));

int main(int argc, char **argv) {
  InitLLVM X(argc, argv);
  autopar::registerTestPasses();
  std::string PassList;
  raw_string_ostream PassListOS(PassList);
  PassListOS << "\nRegistered passes (use with --passes=...):\n";
  autopar::printRegisteredPasses(PassListOS);
  cl::extrahelp PassHelp(PassListOS.str());
  cl::HideUnrelatedOptions(Category);
  cl::ParseCommandLineOptions(argc, argv, "autopar IR optimizer driver\n");

  autopar::OptDriverOptions Options;
  Options.InputFile = InputFile;
  Options.OutputFile = OutputFile;
  Options.Pipeline = Pipeline;
  Options.SplitInputFile = SplitInputFile;
  for (const std::string &Binding : DimBindings)
    if (Error E = Options.Import.addDimBinding(Binding)) {
      WithColor::error(errs(), "autopar-opt") << toString(std::move(E)) << '\n';
      return autopar::ExitBadOptions;
    }
  for (const std::string &Pattern : FreezePatterns)
    if (Error E = Options.Import.addFreeze(Pattern)) {
      WithColor::error(errs(), "autopar-opt") << toString(std::move(E)) << '\n';
      return autopar::ExitBadOptions;
    }
  Options.Import.BatchDim = BatchDim;
  Options.Import.LoadWeights = LoadWeights;
  Options.VerifyRoundTrip = VerifyRoundTrip;
  Options.PassManager.PrintIRAfterAll = PrintIRAfterAll;
  Options.PassManager.TimePasses = TimePasses;
  Options.PassManager.VerifyEach = VerifyEach;
  return autopar::runOptDriver(Options);
}
