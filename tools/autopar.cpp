//===- autopar.cpp - Plans the parallel training of a model ---------------===//
//
// `autopar MODEL.onnx --gpus N [-o DIR]` finds the best tensor, pipeline and
// data parallel plan for MODEL on N GPUs and writes it; `autopar check MODEL
// DIR` says whether the plan in DIR still is what MODEL gives. All the work is
// in driver/PlanDriver; this file only reads the command line.
//
//===----------------------------------------------------------------------===//

#include "driver/OptDriver.h"
#include "driver/PlanDriver.h"
#include "ir/Plan.h"

#include "llvm/Support/CommandLine.h"
#include "llvm/Support/InitLLVM.h"
#include "llvm/Support/WithColor.h"
#include "llvm/Support/raw_ostream.h"

using namespace llvm;

static cl::OptionCategory Category("autopar options");

static cl::list<std::string>
    Positionals(cl::Positional,
                cl::desc("<model .onnx or .pbtxt> | check <model> <plan dir>"),
                cl::cat(Category));
static cl::opt<int64_t> Gpus("gpus", cl::desc("Number of GPUs"),
                             cl::value_desc("N"), cl::init(0),
                             cl::cat(Category));
static cl::opt<std::string>
    Gpu("gpu",
        cl::desc("Device: a100-40gb, a100-80gb, h100, h200, cpu (default "
                 "a100-80gb)"),
        cl::value_desc("name"), cl::init("a100-80gb"), cl::cat(Category));
static cl::opt<int64_t>
    GpusPerNode("gpus-per-node",
                cl::desc("GPUs per node (default: the device's usual node)"),
                cl::value_desc("K"), cl::init(0), cl::cat(Category));
static cl::opt<std::string>
    ClusterFile("cluster",
                cl::desc("Cluster description file, instead of --gpu"),
                cl::value_desc("file.json"), cl::cat(Category));
static cl::opt<std::string> CalibrationFile(
    "calibration",
    cl::desc("Measured GEMM efficiencies of the device (a calibration file "
             "from bench/), replacing the model's curves"),
    cl::value_desc("file.json"), cl::cat(Category));
static cl::opt<int64_t>
    GlobalBatch("global-batch",
                cl::desc("Samples per training step (default: one per GPU)"),
                cl::value_desc("N"), cl::init(0), cl::cat(Category));
// The keys come from the knob table (ir/PlanKnobs.def).
static const std::string FixHelp =
    "Pin choices, e.g. tp=8,pp=4,mbs=1,schedule=interleaved; keys: " +
    autopar::getPlanKnobKeys();
static cl::opt<std::string> Fix("fix", cl::desc(FixHelp),
                                cl::value_desc("key=value,..."),
                                cl::cat(Category));
static cl::opt<unsigned> Top("top",
                             cl::desc("Show the K best plans (default 1)"),
                             cl::value_desc("K"), cl::init(1),
                             cl::cat(Category));
static cl::opt<unsigned>
    Threads("threads",
            cl::desc("Search threads (default 0: the machine's cores, at "
                     "most 8; the result does not depend on it)"),
            cl::value_desc("N"), cl::init(0), cl::cat(Category));
static cl::opt<bool> ForwardPrograms(
    "forward-programs",
    cl::desc("With -o, also write each pipeline stage's forward program "
             "(forward<S>.air) for autopar-run --eval DIR"),
    cl::cat(Category));
static cl::opt<bool>
    TpAcrossNodes("tp-across-nodes",
                  cl::desc("Allow tensor-parallel groups larger than a node"),
                  cl::cat(Category));
static cl::opt<std::string> Format("format",
                                   cl::desc("Summary format: text or json"),
                                   cl::value_desc("format"), cl::init("text"),
                                   cl::cat(Category));
static cl::opt<std::string>
    GivenPlan("plan",
              cl::desc("Evaluate this plan.json (or plan folder) instead of "
                       "searching"),
              cl::value_desc("file"), cl::cat(Category));
static cl::opt<std::string>
    WhatIf("what-if",
           cl::desc("With explain: change the plan first, e.g. tp=4,pp=8 "
                    "(the --fix keys)"),
           cl::value_desc("k=v,..."), cl::cat(Category));
static cl::opt<unsigned>
    ScaleDp("scale-dp",
            cl::desc("Run the plan on K times the GPUs by data parallelism "
                     "(K times the global batch), without a new search"),
            cl::value_desc("K"), cl::init(1), cl::cat(Category));
static cl::opt<std::string>
    OutputDir("o", cl::desc("Write plan.air and plan.json into this folder"),
              cl::value_desc("dir"), cl::cat(Category));
static cl::list<std::string>
    DimBindings("dim",
                cl::desc("Size of a symbolic dimension other than the batch, "
                         "e.g. --dim sequence=2048 (repeatable)"),
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

int main(int argc, char **argv) {
  InitLLVM X(argc, argv);
  cl::HideUnrelatedOptions(Category);
  cl::ParseCommandLineOptions(argc, argv,
                              "autopar: plans parallel training of a model\n");
  // `autopar check MODEL DIR`: re-derive the plan in DIR and compare.
  if (!Positionals.empty() && Positionals[0] == "check") {
    if (Positionals.size() != 3) {
      WithColor::error(errs(), "autopar")
          << "usage: autopar check MODEL.onnx PLAN_DIR\n";
      return autopar::ExitBadOptions;
    }
    return autopar::runCheckDriver(Positionals[1], Positionals[2], Threads);
  }
  if (!Positionals.empty() && Positionals[0] == "explain") {
    if (Positionals.size() != 3) {
      WithColor::error(errs(), "autopar")
          << "usage: autopar explain MODEL.onnx PLAN_DIR [--what-if "
             "k=v,...]\n";
      return autopar::ExitBadOptions;
    }
    return autopar::runExplainDriver(Positionals[1], Positionals[2], WhatIf);
  }
  if (Positionals.size() > 1) {
    WithColor::error(errs(), "autopar")
        << "one model expected, got " << Positionals.size()
        << " arguments; usage: autopar MODEL.onnx --gpus N\n";
    return autopar::ExitBadOptions;
  }
  autopar::PlanDriverOptions Options;
  Options.ModelFile = Positionals.empty() ? "" : Positionals[0];
  Options.Gpus = Gpus;
  Options.Gpu = Gpu;
  Options.GpusPerNode = GpusPerNode;
  Options.ClusterFile = ClusterFile;
  Options.CalibrationFile = CalibrationFile;
  Options.GlobalBatch = GlobalBatch;
  Options.Fix = Fix;
  Options.TopK = Top;
  Options.Threads = Threads;
  Options.TpAcrossNodes = TpAcrossNodes;
  Options.Format = Format;
  Options.OutputDir = OutputDir;
  Options.ForwardPrograms = ForwardPrograms;
  Options.GivenPlan = GivenPlan;
  Options.ScaleDp = ScaleDp;
  for (const std::string &Binding : DimBindings)
    if (Error E = Options.Import.addDimBinding(Binding)) {
      WithColor::error(errs(), "autopar") << toString(std::move(E)) << '\n';
      return autopar::ExitBadOptions;
    }
  for (const std::string &Pattern : FreezePatterns)
    if (Error E = Options.Import.addFreeze(Pattern)) {
      WithColor::error(errs(), "autopar") << toString(std::move(E)) << '\n';
      return autopar::ExitBadOptions;
    }
  Options.Import.BatchDim = BatchDim;
  return autopar::runPlanDriver(Options);
}
