//===- PlanDriver.cpp - What `autopar MODEL --gpus N` does ----------------===//

#include "driver/PlanDriver.h"
#include "ir/BackendCapabilities.h"

#include "codegen/LaunchFiles.h"
#include "codegen/Report.h"
#include "cost/GemmEfficiency.h"
#include "driver/Explain.h"
#include "driver/OptDriver.h"
#include "driver/OutputFiles.h"
#include "driver/PlanFiles.h"
#include "ir/Graph.h"
#include "ir/Parser.h"
#include "ir/Plan.h"
#include "ir/Printer.h"
#include "passes/PassManager.h"
#include "planner/ModelProfile.h"
#include "planner/Search.h"
#include "weights/WeightFile.h"

#include "llvm/ADT/StringExtras.h"
#include "llvm/Support/FileSystem.h"
#include "llvm/Support/Format.h"
#include "llvm/Support/FormatVariadic.h"
#include "llvm/Support/MemoryBuffer.h"
#include "llvm/Support/Path.h"
#include "llvm/Support/Process.h"
#include "llvm/Support/SHA256.h"
#include "llvm/Support/WithColor.h"
#include "llvm/Support/raw_ostream.h"

#include <algorithm>
#include <array>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <set>
#include <thread>

using namespace autopar;
using namespace llvm;

static raw_ostream &error() { return WithColor::error(errs(), "autopar"); }

static constexpr double GiB = double(1ull << 30);

/// The part of the step where Alt loses most against Best.
static std::string whyLost(const PlanPrediction &Alt,
                           const PlanPrediction &Best) {
  auto Parts = [](const PlanPrediction &P) {
    double Bubble = P.PipelineSeconds * P.BubbleFraction;
    return std::array<double, 5>{P.PipelineSeconds - Bubble, Bubble,
                                 P.DpSyncSeconds, P.OptimizerSeconds,
                                 P.OffloadSeconds};
  };
  static const char *Names[] = {"compute and tensor-parallel communication",
                                "pipeline bubble", "data-parallel sync",
                                "optimizer step", "offload transfers"};
  std::array<double, 5> A = Parts(Alt), B = Parts(Best);
  unsigned Worst = 0;
  for (unsigned I = 1; I != A.size(); ++I)
    if (A[I] - B[I] > A[Worst] - B[Worst])
      Worst = I;
  double Delta = A[Worst] - B[Worst];
  if (Delta <= 0)
    return "; ties on time, ordered by configuration";
  return formatv("; loses {0:f3} s on {1}", Delta, Names[Worst]).str();
}

static void printSummary(raw_ostream &OS, const PlanDriverOptions &O,
                         const Cluster &Cl, const SearchResult &R,
                         double SearchSeconds) {
  const Plan &Best = R.Plans.front();
  const PlanConfig &C = Best.Config;
  const PlanPrediction &P = Best.Prediction;
  OS << "autopar: " << sys::path::filename(O.ModelFile) << " on " << Cl.NumGpus
     << " x " << Cl.Device.Name << " (" << Cl.GpusPerNode
     << " per node), global batch " << C.MicroBatch * C.MicroBatches * C.DP
     << "\n";
  OS << "plan: " << C.str() << "\n";
  OS << "  micro-batches: " << C.MicroBatches << ", units per stage:";
  for (unsigned S : C.StageUnits)
    OS << ' ' << S;
  OS << "\n";
  OS << format("predicted step time: %.3f s (pipeline %.3f s, bubble "
               "%.1f%%, data-parallel sync %.3f s, optimizer %.3f s)\n",
               P.StepSeconds, P.PipelineSeconds, 100 * P.BubbleFraction,
               P.DpSyncSeconds, P.OptimizerSeconds);
  OS << format("throughput: %.0f tokens/s, %.1f TFLOP/s per GPU model "
               "(MFU %.1f%%), %.1f hardware (HFU %.1f%%)\n",
               P.TokensPerSecond, P.ModelTflopsPerGpu, 100 * P.Mfu,
               P.HardwareTflopsPerGpu, 100 * P.Hfu);
  OS << format("peak memory per GPU: %.1f GiB of %.1f GiB\n",
               P.PeakMemoryBytes / GiB, P.MemoryCapacityBytes / GiB);
  if (P.OpaqueFraction > 0)
    OS << format("ops autopar does not know (Opaque, priced by estimates): "
                 "%.1f%% of the step\n",
                 100 * P.OpaqueFraction);
  OS << format("search: %llu configurations in %.2f s\n",
               (unsigned long long)R.ConfigsEvaluated, SearchSeconds);
  for (unsigned I = 1; I < R.Plans.size(); ++I) {
    const Plan &Alt = R.Plans[I];
    OS << format("  #%u %+.1f%%: ", I + 1,
                 100 * (Alt.Prediction.StepSeconds / P.StepSeconds - 1))
       << Alt.Config.str()
       << format(" (bubble %.1f%%, sync %.3f s, memory %.1f GiB)",
                 100 * Alt.Prediction.BubbleFraction,
                 Alt.Prediction.DpSyncSeconds,
                 Alt.Prediction.PeakMemoryBytes / GiB)
       << whyLost(Alt.Prediction, P) << "\n";
  }
}

/// searchPlans split over Threads threads by (tp, sp, micro-batch size)
/// triples; thread 0 uses Profile, the others their own copy of the graph
/// parsed from GraphText. The merged result does not depend on Threads.
static Expected<SearchResult>
searchInThreads(ModelProfile &Profile, StringRef GraphText, const Cluster &Cl,
                const CostSettings &Settings, const SearchOptions &SO,
                unsigned Threads) {
  std::vector<SearchResult> Parts(Threads);
  std::vector<std::string> Errors(Threads);
  auto Work = [&](unsigned I) {
    SearchOptions Mine = SO;
    Mine.ShardIndex = I;
    Mine.ShardCount = Threads;
    if (I != 0)
      Mine.Progress = nullptr;
    ModelProfile *P = &Profile;
    SourceMgr SM;
    std::unique_ptr<Module> Copy;
    std::unique_ptr<ModelProfile> Own;
    if (I != 0) {
      SM.AddNewSourceBuffer(MemoryBuffer::getMemBufferCopy(GraphText, "plan"),
                            SMLoc());
      std::string Ignored;
      raw_string_ostream Sink(Ignored);
      DiagnosticEngine Diag(&SM, "plan", Sink);
      Copy = parseModule(SM, Diag);
      if (!Copy || Copy->getGraphs().size() != 1) {
        Errors[I] = "internal error: the graph does not parse again";
        return;
      }
      Expected<std::unique_ptr<ModelProfile>> Made =
          ModelProfile::create(*Copy->getGraphs().front(), Cl, Settings);
      if (!Made) {
        Errors[I] = toString(Made.takeError());
        return;
      }
      Own = std::move(*Made);
      P = Own.get();
    }
    Expected<SearchResult> R = searchPlans(*P, Cl, Mine);
    if (!R)
      Errors[I] = toString(R.takeError());
    else
      Parts[I] = std::move(*R);
  };
  std::vector<std::thread> Pool;
  for (unsigned I = 1; I != Threads; ++I)
    Pool.emplace_back(Work, I);
  Work(0);
  for (std::thread &T : Pool)
    T.join();
  for (const std::string &E : Errors)
    if (!E.empty())
      return createStringError(inconvertibleErrorCode(), E);
  return mergeSearchResults(std::move(Parts), SO.TopK);
}

/// Whether detect-layers found repeated blocks: some node is in a layer
/// other than 0.
static bool hasRepeatedBlocks(const Graph &G) {
  for (const Node &N : G.getNodes())
    if (const Attribute *A = N.getAttr("layer"))
      if (A->isa(Attribute::Kind::Int) && A->getInt() != 0)
        return true;
  return false;
}

/// The configuration, cut and global batch of a plan.json (or of the
/// plan.json in a folder).
static Expected<std::pair<PlanConfig, int64_t>> readGivenPlan(StringRef Path) {
  SmallString<256> File(Path);
  if (sys::fs::is_directory(File))
    sys::path::append(File, "plan.json");
  ErrorOr<std::unique_ptr<MemoryBuffer>> Buf = MemoryBuffer::getFile(File);
  if (!Buf)
    return createStringError(inconvertibleErrorCode(),
                             "cannot read '" + File +
                                 "': " + Buf.getError().message());
  Expected<PlanRecord> R = parsePlanJSON((*Buf)->getBuffer(), File);
  if (!R)
    return R.takeError();
  return std::make_pair(R->Config, R->GlobalBatch);
}

/// A given plan's predictions, as a search result of one plan. A plan to be
/// written must run on its backend; explain's what-if (PricingOnly) prices
/// any choice.
static Expected<SearchResult>
evaluateGiven(ModelProfile &Profile, const Cluster &Cl, const SearchOptions &SO,
              const PlanConfig &C, bool PricingOnly) {
  if (C.TP * C.PP * C.DP != Cl.NumGpus)
    return createStringError(
        inconvertibleErrorCode(),
        "the given plan uses tp x pp x dp = " + Twine(C.TP * C.PP * C.DP) +
            " GPUs, the cluster has " + Twine(Cl.NumGpus) +
            "; pass --gpus to match");
  if (!PricingOnly)
    if (Error E = checkCapabilities(Cl, C, "the given plan's"))
      return E;
  Expected<Plan> P = evaluatePlan(Profile, Cl, SO, C);
  if (!P)
    return P.takeError();
  SearchResult R;
  R.Plans.push_back(std::move(*P));
  R.ConfigsEvaluated = 1;
  return R;
}

/// When nothing fits: the smallest multiple of the GPU count that does.
/// HostShort: the candidates fit the device but not the host.
static std::string suggestGpus(ModelProfile &Profile, const Cluster &Cl,
                               const SearchOptions &SO, bool HostShort) {
  for (unsigned Factor : {2u, 4u, 8u, 16u, 32u, 64u}) {
    int64_t N = int64_t(Cl.NumGpus) * Factor;
    if (N > MaxGpus)
      break;
    Cluster Bigger = Cl;
    Bigger.NumGpus = N;
    SearchOptions More = SO;
    More.TopK = 1;
    More.GlobalBatch = SO.GlobalBatch * Factor;
    More.WarnUnpricedPins = false;
    Expected<SearchResult> R = searchPlans(Profile, Bigger, More);
    if (!R) {
      consumeError(R.takeError());
      continue;
    }
    if (!R->Plans.empty())
      return ("--gpus " + Twine(N) + " (with --global-batch " +
              Twine(More.GlobalBatch) +
              ") fits: " + R->Plans.front().Config.str())
          .str();
  }
  if (HostShort)
    return "no GPU count up to 64x this one fits with these pins; a larger "
           "data-parallel size shards the offloaded state further, and "
           "offloading only the optimizer (--fix offload=optimizer-cpu) "
           "offloads less";
  return "no GPU count up to 64x this one fits; use a device with more "
         "memory (--gpu) or offload (--fix offload=cpu,zero=3)";
}

/// When nothing fits: the largest model of the same shape that does (the
/// most of its repeated blocks, found by bisection: memory grows with
/// blocks), with its parameter count and plan.
static std::string suggestLayers(ModelProfile &Profile, const Cluster &Cl,
                                 const SearchOptions &SO) {
  std::vector<unsigned> Repeated = Profile.getRepeatedUnits();
  if (Repeated.size() < 2)
    return "";
  auto Fits = [&](unsigned Keep) -> std::optional<Plan> {
    SearchOptions Fewer = SO;
    Fewer.TopK = 1;
    Fewer.KeepBlocks = Keep;
    Fewer.Progress = nullptr;
    Fewer.WarnUnpricedPins = false;
    Expected<SearchResult> R = searchPlans(Profile, Cl, Fewer);
    if (!R) {
      consumeError(R.takeError());
      return std::nullopt;
    }
    if (R->Plans.empty())
      return std::nullopt;
    return std::move(R->Plans.front());
  };
  // Invariant: Lo blocks fit (or Lo = 0 and nothing was tried), Hi do not.
  unsigned Lo = 0, Hi = Repeated.size();
  std::optional<Plan> Best;
  while (Hi - Lo > 1) {
    unsigned Mid = Lo + (Hi - Lo) / 2;
    if (std::optional<Plan> P = Fits(Mid)) {
      Lo = Mid;
      Best = std::move(P);
    } else {
      Hi = Mid;
    }
  }
  if (!Best)
    return ("no smaller model of this shape fits either: even 1 of its " +
            Twine(Repeated.size()) + " blocks does not")
        .str();
  // Parameters of the smaller model: the whole model's less the dropped
  // blocks' (each block holds the same parameters).
  Expected<const std::vector<UnitCost> *> Whole =
      Profile.getUnitCosts(1, false, Best->Config.MicroBatch);
  double Params = Profile.getTotalParams();
  if (Whole)
    Params -= double(Repeated.size() - Lo) *
              (**Whole)[Repeated.front()].ParamElements;
  else
    consumeError(Whole.takeError());
  return ("the largest model of this shape that fits keeps " + Twine(Lo) +
          " of its " + Twine(Repeated.size()) + " blocks (" +
          formatv("{0:f2}", Params / 1e9) +
          "B parameters): " + Best->Config.str())
      .str();
}

/// `autopar check`'s comparison: 0 when every file is there with the same
/// bytes; else 1, naming each file that differs and showing the first
/// lines that do.
static int compareFiles(ArrayRef<std::pair<std::string, std::string>> Files,
                        StringRef Dir) {
  unsigned Differ = 0;
  for (const auto &[Path, Want] : Files) {
    ErrorOr<std::unique_ptr<MemoryBuffer>> Have = MemoryBuffer::getFile(Path);
    if (!Have) {
      outs() << Path << ": missing (re-derived plan has it)\n";
      ++Differ;
      continue;
    }
    StringRef Old = (*Have)->getBuffer();
    if (Old == Want)
      continue;
    ++Differ;
    SmallVector<StringRef, 64> A, B;
    Old.split(A, '\n');
    StringRef(Want).split(B, '\n');
    unsigned I = 0;
    while (I < A.size() && I < B.size() && A[I] == B[I])
      ++I;
    outs() << "--- " << Path << " (checked in)\n+++ " << Path
           << " (re-derived)\n@@ line " << I + 1 << " @@\n";
    for (unsigned K = I; K < A.size() && K < I + 6; ++K)
      outs() << '-' << A[K] << '\n';
    for (unsigned K = I; K < B.size() && K < I + 6; ++K)
      outs() << '+' << B[K] << '\n';
  }
  if (Differ) {
    outs() << "autopar check: " << Differ << " of " << Files.size()
           << " files in " << Dir
           << " differ from the plan the model and inputs give now; "
              "re-plan and commit the result\n";
    return 1;
  }
  outs() << "autopar check: the plan in " << Dir << " holds (" << Files.size()
         << " files)\n";
  return ExitSuccess;
}

/// The options that re-plan what DIR/plan.json records; returns an exit
/// code other than ExitSuccess on failure.
static int optionsFromPlan(StringRef ModelFile, StringRef PlanDir,
                           PlanDriverOptions &O) {
  SmallString<256> JsonPath(PlanDir);
  sys::path::append(JsonPath, "plan.json");
  ErrorOr<std::unique_ptr<MemoryBuffer>> Buf = MemoryBuffer::getFile(JsonPath);
  if (!Buf) {
    error() << "cannot read '" << JsonPath << "': " << Buf.getError().message()
            << "\n";
    return ExitIOError;
  }
  Expected<PlanRecord> R = parsePlanJSON((*Buf)->getBuffer(), JsonPath);
  if (!R) {
    error() << toString(R.takeError()) << "\n";
    return ExitInvalidInput;
  }
  if (!R->Inputs) {
    error() << JsonPath
            << ": no 'inputs' (written by another autopar version?); "
               "re-plan it\n";
    return ExitInvalidInput;
  }
  const PlanInputs &Inputs = *R->Inputs;
  O.ModelFile = ModelFile.str();
  O.OutputDir = PlanDir.str();
  O.ClusterJSON = formatv("{0}", attributeToJSON(R->Cluster)).str();
  O.GlobalBatch = Inputs.GlobalBatch;
  O.Fix = Inputs.Fix;
  O.Import.BatchDim = Inputs.BatchDim;
  for (const std::string &Pattern : Inputs.Freeze)
    if (Error E = O.Import.addFreeze(Pattern)) {
      error() << JsonPath << ": " << toString(std::move(E)) << "\n";
      return ExitInvalidInput;
    }
  O.TpAcrossNodes = Inputs.TpAcrossNodes;
  O.TopK = Inputs.Top;
  for (const std::string &D : Inputs.Dims)
    if (Error E = O.Import.addDimBinding(D)) {
      error() << JsonPath << ": " << toString(std::move(E)) << "\n";
      return ExitInvalidInput;
    }
  return ExitSuccess;
}

int autopar::runCheckDriver(StringRef ModelFile, StringRef PlanDir,
                            unsigned Threads) {
  PlanDriverOptions O;
  if (int Code = optionsFromPlan(ModelFile, PlanDir, O))
    return Code;
  O.CheckOnly = true;
  O.Threads = Threads;
  return runPlanDriver(O);
}

int autopar::runExplainDriver(StringRef ModelFile, StringRef PlanDir,
                              StringRef WhatIf) {
  PlanDriverOptions O;
  if (int Code = optionsFromPlan(ModelFile, PlanDir, O))
    return Code;
  O.Explain = true;
  O.WhatIf = WhatIf.str();
  O.GivenPlan = PlanDir.str();
  O.OutputDir.clear();
  return runPlanDriver(O);
}

int autopar::runRetargetDriver(StringRef ModelFile, StringRef PlanDir,
                               int64_t Dp, int64_t Gpus, StringRef OutputDir) {
  PlanDriverOptions O;
  if (int Code = optionsFromPlan(ModelFile, PlanDir, O))
    return Code;
  O.GivenPlan = PlanDir.str();
  O.OutputDir = OutputDir.str();
  O.Gpus = Gpus;
  // --what-if's dp rule: dp = GPUs / (tp x pp), micro-batches from the
  // global batch.
  O.WhatIf = "dp=" + std::to_string(Dp);
  return runPlanDriver(O);
}

namespace {

Error fail(int Code, const Twine &Message = "") {
  return makeExitError(Code, Message);
}

/// The options that need checking or parsing before any work.
struct CheckedOptions {
  unsigned Threads;
  PlanFixes Fixes;
  Cluster Cl;
};

/// The imported model, canonicalized, with its inline weights moved to the
/// plan's weight file.
struct ImportedModel {
  std::unique_ptr<Module> M;
  std::string WeightsFile;
  Graph &graph() const { return *M->getGraphs().front(); }
};

/// What the search starts from: a given plan (--plan) or none, and the
/// global batch.
struct GivenPlan {
  std::optional<PlanConfig> Config;
  int64_t GlobalBatch;
};

} // namespace

static Expected<CheckedOptions> checkOptions(const PlanDriverOptions &O) {
  if (O.ModelFile.empty())
    return fail(ExitBadOptions, "no model given; usage: autopar MODEL.onnx "
                                "--gpus N");
  if (O.Format != "text" && O.Format != "json")
    return fail(ExitBadOptions,
                "--format " + O.Format + ": expected text or json");
  if (O.Threads > 1024)
    return fail(ExitBadOptions, "--threads " + Twine(O.Threads) +
                                    ": expected 0 (the cores) to 1024");
  // 0: the machine's cores, at most 8 (each thread plans from its own copy
  // of the graph). The plan does not depend on it.
  unsigned Threads =
      O.Threads ? O.Threads
                : std::clamp(std::thread::hardware_concurrency(), 1u, 8u);
  if (O.TopK < 1 || O.TopK > 100)
    return fail(ExitBadOptions,
                "--top " + Twine(O.TopK) + ": expected 1 to 100");
  Expected<PlanFixes> Fixes = PlanFixes::parse(O.Fix);
  if (!Fixes)
    return fail(ExitBadOptions, toString(Fixes.takeError()));
  if (O.ClusterFile.empty() && O.ClusterJSON.empty() && O.Gpus < 1)
    return fail(ExitBadOptions, "--gpus N is required (or --cluster "
                                "FILE.json)");
  Expected<Cluster> Cl =
      !O.ClusterJSON.empty()
          ? parseClusterJSON(O.ClusterJSON, "plan.json", "",
                             std::max<int64_t>(O.Gpus, 0), O.GpusPerNode)
      : O.ClusterFile.empty()
          ? makeCluster(O.Gpu, O.Gpus, O.GpusPerNode)
          : loadClusterFile(O.ClusterFile, O.Gpus, O.GpusPerNode);
  if (!Cl)
    return fail(ExitBadOptions, toString(Cl.takeError()));
  // Measured curves replace the model's for the precisions they cover; the
  // plan records them with the cluster (plan.json).
  if (!O.CalibrationFile.empty())
    if (Error E = loadCalibration(O.CalibrationFile, Cl->Device))
      return fail(ExitBadOptions, "--calibration: " + toString(std::move(E)));
  // Gradients are reduced in fp32 or in the precision they are computed in.
  if (Fixes->GradReduce && *Fixes->GradReduce != Precision::FP32) {
    Precision Compute =
        Fixes->TrainPrecision.value_or(defaultTrainingPrecision(Cl->Device));
    if (*Fixes->GradReduce != Compute)
      return fail(ExitBadOptions,
                  "--fix grad-reduce=" + getPrecisionName(*Fixes->GradReduce) +
                      ": gradients are reduced in fp32 or in the compute "
                      "precision, which is " +
                      getPrecisionName(Compute) + " here; pin precision=" +
                      getPrecisionName(*Fixes->GradReduce) + " with it");
  }
  if (O.GlobalBatch < 0)
    return fail(ExitBadOptions, "--global-batch " + Twine(O.GlobalBatch) +
                                    ": must be positive");
  if (O.ScaleDp < 1 || O.ScaleDp > 1024)
    return fail(ExitBadOptions,
                "--scale-dp " + Twine(O.ScaleDp) + ": expected 1 to 1024");
  if (Error E = O.Import.validate())
    return fail(ExitBadOptions, toString(std::move(E)));
  if (!sys::fs::exists(O.ModelFile))
    return fail(ExitIOError,
                "cannot read '" + O.ModelFile + "': no such file or directory");
  return CheckedOptions{Threads, std::move(*Fixes), std::move(*Cl)};
}

static Expected<ImportedModel>
importModel(const PlanDriverOptions &O, bool Fusion, DiagnosticEngine &Diag) {
  // The model's inline weights are read (fusions prove rotary embeddings
  // from them) and then moved into the plan folder's own weight file, so
  // that the plan trains from the model's weights.
  ImportOptions Import = O.Import;
  Import.LoadInlineWeights = true;
  std::unique_ptr<Module> M = importOnnxModel(O.ModelFile, Import, Diag);
  if (!M)
    return fail(ExitInvalidInput);
  // Without fusion (ir/PlanKnobs.def) the program keeps the graph's
  // element-wise ops, and the cost model prices each as a kernel.
  PassManager PM;
  cantFail(PM.addPipeline(Fusion ? "import-canonical" : "import-eager"));
  if (failed(PM.run(*M, Diag)))
    return fail(ExitPassFailure);
  std::string WeightsFile = externalizeInlineWeights(*M, WeightsFileName);
  if (M->getGraphs().size() != 1)
    return fail(ExitInvalidInput, O.ModelFile + ": expected one graph, found " +
                                      Twine(M->getGraphs().size()));
  return ImportedModel{std::move(M), std::move(WeightsFile)};
}

/// A given plan (--plan): its configuration and global batch, with --what-if
/// applied, on the cluster the options describe.
static Expected<GivenPlan> readGiven(const PlanDriverOptions &O,
                                     const Cluster &Cl) {
  GivenPlan Given{std::nullopt, O.GlobalBatch};
  if (O.GivenPlan.empty())
    return Given;
  Expected<std::pair<PlanConfig, int64_t>> GP = readGivenPlan(O.GivenPlan);
  if (!GP)
    return fail(ExitInvalidInput, toString(GP.takeError()));
  Given.Config = GP->first;
  if (!Given.GlobalBatch)
    Given.GlobalBatch = GP->second;
  if (!O.WhatIf.empty())
    if (Error E =
            applyWhatIf(*Given.Config, O.WhatIf, Cl.NumGpus, Given.GlobalBatch))
      return fail(ExitBadOptions, toString(std::move(E)));
  return Given;
}

/// Pipeline stages inside a model without repeated blocks: its one unit is
/// cut into as many as the pinned or given pipeline needs.
static Error cutIntoUnits(const PlanDriverOptions &O, const PlanFixes &Fixes,
                          const std::optional<PlanConfig> &Given, Module &M,
                          DiagnosticEngine &Diag) {
  std::optional<unsigned> PinnedPP = Given ? Given->PP : Fixes.PP;
  unsigned Chunks = !PinnedPP ? 1
                    : Given   ? Given->PP * Given->VPP
                              : *Fixes.PP * Fixes.VPP.value_or(1);
  Graph &G = *M.getGraphs().front();
  if (Chunks <= 1 || hasRepeatedBlocks(G))
    return Error::success();
  PassManager Cut;
  cantFail(Cut.addPipeline("detect-layers{min-units=" + std::to_string(Chunks) +
                           "}"));
  if (failed(Cut.run(M, Diag)))
    return fail(ExitPassFailure);
  std::set<int64_t> Pieces;
  for (const Node &N : G.getNodes())
    if (const Attribute *A = N.getAttr("layer"))
      Pieces.insert(A->getInt());
  if (Pieces.size() >= Chunks)
    return Error::success();
  unsigned PP = *PinnedPP, VPP = Chunks / PP;
  return fail(ExitBadOptions,
              O.ModelFile + ": " + (Given ? "the plan's" : "--fix") + " pp=" +
                  Twine(PP) + (VPP > 1 ? ",vpp=" + Twine(VPP) : Twine()) +
                  " needs " + Twine(Chunks) +
                  " layer units to cut between; the model has no repeated "
                  "blocks and " +
                  Twine(Pieces.size()) + " compute node" +
                  (Pieces.size() == 1 ? "" : "s") + " to cut it into; pin " +
                  (VPP > 1 ? "pp x vpp" : "pp") + " to at most " +
                  Twine(Pieces.size()));
}

/// What the search fixes before it starts: the batch, the pins, and the
/// choices that are not searched (precision, attention kernel, overlap).
static SearchOptions makeSearchOptions(const PlanDriverOptions &O,
                                       const CheckedOptions &C,
                                       const GivenPlan &Given) {
  const std::optional<PlanConfig> &Plan = Given.Config;
  const PlanFixes &Fixes = C.Fixes;
  SearchOptions SO;
  SO.GlobalBatch = Given.GlobalBatch ? Given.GlobalBatch : C.Cl.NumGpus;
  SO.Fixed = Fixes;
  // The precision is not searched: a given plan's, a pinned one, or the
  // device's default. Per-op costs are priced in it.
  SO.TrainPrecision = Plan ? Plan->TrainPrecision
                      : Fixes.TrainPrecision
                          ? *Fixes.TrainPrecision
                          : defaultTrainingPrecision(C.Cl.Device);
  // Nor is the attention kernel: the plan's, a pinned one, or flash where
  // the device and precision have it.
  SO.Attention = Plan ? Plan->Attention
                 : Fixes.Attention
                     ? *Fixes.Attention
                     : defaultAttentionKernel(C.Cl.Device, SO.TrainPrecision);
  // Overlap where the backend overlaps (ir/BackendCapabilities.def).
  SO.DpOverlap =
      Plan ? Plan->DpOverlap
           : Fixes.DpOverlap.value_or(hasCapability(
                 getPlanBackend(C.Cl.Device.Name), Capability::OverlapDpSync));
  SO.GradReduce =
      Plan ? Plan->GradReduce : Fixes.GradReduce.value_or(Precision::FP32);
  SO.GradBucket =
      Plan ? std::optional<int64_t>(Plan->GradBucket) : Fixes.GradBucket;
  SO.VerifyTransfers =
      Plan ? Plan->VerifyTransfers : Fixes.VerifyTransfers.value_or(false);
  SO.TopK = O.TopK;
  SO.TpAcrossNodes = O.TpAcrossNodes;
  return SO;
}

/// Evaluates the given plan or searches (in threads, each from its own copy
/// of the graph GraphText), then re-targets the best plan to --scale-dp
/// times the GPUs by data parallelism (updating Cl and SO). Failures name
/// the model.
static Expected<SearchResult>
searchOrEvaluate(const PlanDriverOptions &O, ModelProfile &Profile,
                 StringRef GraphText, unsigned Threads, Cluster &Cl,
                 SearchOptions &SO, const CostSettings &Settings,
                 const std::optional<PlanConfig> &Given) {
  Expected<SearchResult> Result =
      Given ? evaluateGiven(Profile, Cl, SO, *Given, O.Explain)
      : Threads > 1
          ? searchInThreads(Profile, GraphText, Cl, Settings, SO, Threads)
          : searchPlans(Profile, Cl, SO);
  if (!Result)
    return fail(ExitBadOptions,
                O.ModelFile + ": " + toString(Result.takeError()));
  if (O.ScaleDp <= 1 || Result->Plans.empty())
    return Result;
  Cluster Bigger = Cl;
  Bigger.NumGpus *= O.ScaleDp;
  SearchOptions More = SO;
  More.GlobalBatch *= O.ScaleDp;
  PlanConfig C = Result->Plans.front().Config;
  C.DP *= O.ScaleDp;
  Expected<Plan> Scaled = evaluatePlan(Profile, Bigger, More, C);
  if (!Scaled)
    return fail(ExitBadOptions, O.ModelFile + ": --scale-dp " +
                                    Twine(O.ScaleDp) + ": " +
                                    toString(Scaled.takeError()));
  Cl = Bigger;
  SO = More;
  Result->Plans = {std::move(*Scaled)};
  return Result;
}

/// The failure when no plan came out: what conflicts when no candidate
/// exists at all (memory is not the question, so more GPUs or a smaller
/// model are no answer), else how far the best one is from fitting.
static Error explainNoPlan(const PlanDriverOptions &O, ModelProfile &Profile,
                           const Cluster &Cl, const SearchOptions &SO,
                           const SearchResult &Result) {
  std::string Message;
  raw_string_ostream OS(Message);
  std::string Conflict =
      Result.LeastMemoryNeeded > 0 || Result.LeastHostMemoryNeeded > 0
          ? ""
          : explainEmptySearchSpace(Profile, Cl, SO);
  if (!Conflict.empty()) {
    OS << O.ModelFile << ": no plan has the pinned choices"
       << (O.Fix.empty() ? "" : " (--fix " + O.Fix + ")")
       << " with --global-batch " << SO.GlobalBatch << " on " << Cl.NumGpus
       << " GPUs: " << Conflict;
    return fail(O.CheckOnly ? 1 : ExitBadOptions, OS.str());
  }
  OS << O.ModelFile << ": no plan fits";
  if (Result.LeastMemoryNeeded > 0)
    OS << format(": the best candidate needs %.1f GiB per GPU, the %s has "
                 "%.1f GiB",
                 Result.LeastMemoryNeeded / GiB, Cl.Device.Name.c_str(),
                 Cl.Device.MemoryBytes / GiB);
  else if (Result.LeastHostMemoryNeeded > 0)
    OS << format(": the best candidate offloads %.1f GiB per GPU to host "
                 "memory, each GPU's share of its node's is %.1f GiB",
                 Result.LeastHostMemoryNeeded / GiB,
                 hostMemoryBytesPerGpu(Cl) / GiB);
  else
    OS << " the pinned choices (--fix " << O.Fix << ") with --global-batch "
       << SO.GlobalBatch << " on " << Cl.NumGpus << " GPUs";
  if (O.CheckOnly) {
    OS << "\n  the plan in " << O.OutputDir << " no longer fits; re-plan it";
    return fail(1, OS.str());
  }
  OS << "\n  "
     << suggestGpus(Profile, Cl, SO,
                    Result.LeastMemoryNeeded == 0 &&
                        Result.LeastHostMemoryNeeded > 0);
  std::string Smaller = suggestLayers(Profile, Cl, SO);
  if (!Smaller.empty())
    OS << "\n  " << Smaller;
  return fail(ExitBadOptions, OS.str());
}

/// Prints the result as text or JSON (nothing for `autopar check`).
static void printResult(const PlanDriverOptions &O, const Cluster &Cl,
                        const SearchResult &Result, double SearchSeconds) {
  const Plan &Best = Result.Plans.front();
  if (O.CheckOnly) {
    // Quiet: only the verdict.
  } else if (O.Format == "json") {
    json::Value SummaryValue = attributeToJSON(Attribute::getDict(
        encodePlanConfig(Best.Config, getRecordedPrediction(Best.Prediction))));
    json::Object &Summary = *SummaryValue.getAsObject();
    Summary["configs_evaluated"] = int64_t(Result.ConfigsEvaluated);
    Summary["search_time_s"] = roundToSignificant(SearchSeconds, 3);
    outs() << formatv("{0:2}", SummaryValue) << "\n";
  } else {
    printSummary(outs(), O, Cl, Result, SearchSeconds);
  }
  outs().flush();
}

/// Writes the plan folder (or, for `autopar check`, compares it).
static Error emitPlanFolder(const PlanDriverOptions &O, PlanFilesInput &In) {
  Expected<OutputFileList> Files = renderPlanFiles(In);
  if (!Files)
    return fail(ExitPassFailure,
                O.ModelFile + ": " + toString(Files.takeError()));
  if (O.CheckOnly) {
    if (int Code = compareFiles(*Files, O.OutputDir))
      return fail(Code);
    return Error::success();
  }
  SmallString<256> LaunchDir(O.OutputDir);
  sys::path::append(LaunchDir, "launch");
  if (std::error_code EC = sys::fs::create_directories(LaunchDir))
    return fail(ExitIOError,
                "cannot create '" + LaunchDir + "': " + EC.message());
  if (Error E = writeOutputFiles(*Files))
    return fail(ExitIOError, toString(std::move(E)));
  return Error::success();
}

/// The steps of `autopar MODEL`: check the options, import, search,
/// print, and write the plan folder.
static Error planModel(const PlanDriverOptions &O) {
  Expected<CheckedOptions> Checked = checkOptions(O);
  if (!Checked)
    return Checked.takeError();
  Cluster &Cl = Checked->Cl;
  DiagnosticEngine Diag(nullptr, O.ModelFile);
  Expected<GivenPlan> Given = readGiven(O, Cl);
  if (!Given)
    return Given.takeError();
  // Fusion is not searched: the given plan's, or the pinned, or on.
  bool Fusion = Given->Config ? Given->Config->Fusion
                              : Checked->Fixes.Fusion.value_or(true);
  Expected<ImportedModel> Model = importModel(O, Fusion, Diag);
  if (!Model)
    return Model.takeError();
  if (Error E = cutIntoUnits(O, Checked->Fixes, Given->Config, *Model->M, Diag))
    return E;

  auto Start = std::chrono::steady_clock::now();
  // Worker threads plan from their own copy of the graph (a profile rebinds
  // the graph's types as it goes).
  std::string GraphText;
  if (Checked->Threads > 1) {
    raw_string_ostream OS(GraphText);
    printModule(OS, *Model->M);
  }
  SearchOptions SO = makeSearchOptions(O, *Checked, *Given);
  SO.Fusion = Fusion; // what the import did
  CostSettings Settings;
  Settings.Compute = SO.TrainPrecision;
  Settings.Attention = SO.Attention;
  Expected<std::unique_ptr<ModelProfile>> Profile =
      ModelProfile::create(Model->graph(), Cl, Settings);
  if (!Profile)
    return fail(ExitBadOptions,
                O.ModelFile + ": " + toString(Profile.takeError()));
  // A progress line on a terminal, at most a few times a second.
  bool ShowProgress = sys::Process::StandardErrIsDisplayed();
  auto LastShown = Start;
  if (ShowProgress)
    SO.Progress = [&](uint64_t Evaluated) {
      auto Now = std::chrono::steady_clock::now();
      if (Now - LastShown < std::chrono::milliseconds(200))
        return;
      LastShown = Now;
      errs() << "\rautopar: searching, " << Evaluated
             << " configurations evaluated";
    };
  Expected<SearchResult> Result =
      searchOrEvaluate(O, **Profile, GraphText, Checked->Threads, Cl, SO,
                       Settings, Given->Config);
  if (ShowProgress && LastShown != Start)
    errs() << "\r\x1b[K";
  if (!Result)
    return Result.takeError();
  double SearchSeconds =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - Start)
          .count();
  if (Result->Plans.empty())
    return explainNoPlan(O, **Profile, Cl, SO, *Result);
  if (O.Explain) {
    printExplanation(outs(), Result->Plans.front(), **Profile, Cl);
    return Error::success();
  }
  printResult(O, Cl, *Result, SearchSeconds);
  if (O.OutputDir.empty())
    return Error::success();
  PlanFilesInput In;
  In.Options = &O;
  In.Cl = &Cl;
  In.M = Model->M.get();
  In.Profile = Profile->get();
  In.Plans = Result->Plans;
  In.GlobalBatch = SO.GlobalBatch;
  In.WeightsFile = std::move(Model->WeightsFile);
  return emitPlanFolder(O, In);
}

int autopar::runPlanDriver(const PlanDriverOptions &O) {
  return reportExitError(planModel(O), "autopar", ExitPassFailure);
}
