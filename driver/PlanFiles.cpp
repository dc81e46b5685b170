//===- PlanFiles.cpp - The files `autopar -o DIR` writes ------------------===//

#include "driver/PlanFiles.h"

#include "codegen/LaunchFiles.h"
#include "codegen/Report.h"
#include "ir/Graph.h"
#include "ir/Plan.h"
#include "ir/Printer.h"
#include "passes/PassManager.h"
#include "passes/PlanPipelines.h"
#include "planner/ModelProfile.h"

#include "llvm/ADT/StringExtras.h"
#include "llvm/Support/MemoryBuffer.h"
#include "llvm/Support/Path.h"
#include "llvm/Support/SHA256.h"
#include "llvm/Support/WithColor.h"

using namespace autopar;
using namespace llvm;

static std::string sha256Of(StringRef Path) {
  ErrorOr<std::unique_ptr<MemoryBuffer>> Buf = MemoryBuffer::getFile(Path);
  if (!Buf)
    return "unknown";
  SHA256 H;
  H.update((*Buf)->getBuffer());
  return toHex(H.final(), /*LowerCase=*/true);
}

/// What launch files need to know of the model: transformer blocks (the
/// units between the embedding and the head), their width, heads,
/// sequence, and the blocks in each virtual stage.
static ModelShape getModelShape(const Graph &G, const ModelProfile &Profile,
                                const PlanConfig &C) {
  ArrayRef<LayerUnit> Units = Profile.getUnits();
  bool HasEnds = Units.size() > 2;
  ModelShape S;
  S.Layers = HasEnds ? int64_t(Units.size()) - 2 : int64_t(Units.size());
  if (HasEnds)
    for (const Value *V : Units[1].Nodes.front()->getOperands())
      if (V && V->getType().getRank() && !V->isParam()) {
        const Dim &D = V->getType().getDim(V->getType().getRank() - 1);
        S.Hidden = D.isStatic() ? D.getSize() : 0;
        break;
      }
  // Without a layer structure (a one-block model is one unit): the width
  // of the first [batch, sequence, hidden] activation.
  if (!S.Hidden)
    for (const Node &N : G.getNodes()) {
      if (!N.getNumResults())
        continue;
      const TensorType &T = N.getResult(0)->getType();
      if (T.getRank() == 3 && isFloatElementType(T.getElementType()) &&
          T.getDim(2).isStatic()) {
        S.Hidden = T.getDim(2).getSize();
        break;
      }
    }
  if (!G.getOutputs().empty() && G.getOutputs()[0]->getType().getRank()) {
    const TensorType &T = G.getOutputs()[0]->getType();
    const Dim &D = T.getDim(T.getRank() - 1);
    S.Vocab = D.isStatic() ? D.getSize() : 0;
  }
  unsigned Unit = 0;
  for (unsigned Stage : C.StageUnits) {
    int64_t N = 0;
    for (unsigned I = 0; I != Stage; ++I, ++Unit)
      N += !HasEnds || (Unit != 0 && Unit + 1 != Units.size());
    S.LayersPerStage.push_back(N);
  }
  S.Heads = Profile.getAttentionHeads();
  S.SeqLength = Profile.getTokensPerSample();
  return S;
}

/// The record of the chosen plan (without its pipelines).
static PlanRecord makeRecord(const PlanFilesInput &In) {
  const PlanDriverOptions &O = *In.Options;
  const Plan &Best = In.Plans.front();
  PlanRecord R;
  R.AutoparVersion = AutoparVersion;
  R.Model = sys::path::filename(O.ModelFile).str();
  R.ModelSha256 = sha256Of(O.ModelFile);
  R.GlobalBatch = Best.Config.getGlobalBatch();
  PlanInputs Inputs;
  Inputs.GlobalBatch = In.GlobalBatch;
  Inputs.Fix = O.Fix;
  for (const auto &[Name, Size] : O.Import.DimBindings)
    Inputs.Dims.push_back(Name + "=" + std::to_string(Size));
  Inputs.BatchDim = O.Import.BatchDim;
  Inputs.Freeze = O.Import.Freeze;
  Inputs.TpAcrossNodes = O.TpAcrossNodes;
  Inputs.Top = O.TopK;
  R.Inputs = std::move(Inputs);
  R.Cluster = attributeFromJSON(clusterToJSON(*In.Cl));
  R.ClusterName = In.Cl->Device.Name;
  R.NumGpus = In.Cl->NumGpus;
  R.GpusPerNode = In.Cl->GpusPerNode;
  R.Shape = getModelShape(*In.M->getGraphs().front(), *In.Profile, Best.Config);
  R.Config = Best.Config;
  R.Predicted = getRecordedPrediction(Best.Prediction);
  R.Memory = getRecordedMemory(Best.Prediction);
  return R;
}

/// Lays the plan out in the module: records R as its attributes, binds the
/// batch to the micro-batch and runs the plan pipeline (PlanPipelines.h),
/// which reads the plan from there: the batch split, the layout and stages
/// as annotations, the communication they imply as nodes.
static Error materializePlan(const PlanFilesInput &In, const PlanRecord &R) {
  if (Error E = In.Profile->bindMicroBatch(R.Config.MicroBatch))
    return E;
  In.M->getAttrs() = encodePlan(R);
  PassManager Lower;
  cantFail(Lower.addPipeline(buildPlanPipeline()));
  std::string Messages;
  raw_string_ostream MOS(Messages);
  DiagnosticEngine Diag(nullptr, In.Options->ModelFile, MOS);
  if (failed(Lower.run(*In.M, Diag)))
    return createStringError(inconvertibleErrorCode(), MOS.str());
  return Error::success();
}

/// plan.air is IR: it must parse, verify and print back to the same bytes
/// (what `autopar-opt plan.air` does); anything else is a bug here.
static Error checkRoundTrip(StringRef Air) {
  Expected<std::string> Again = runPipelineOnText(Air, "");
  if (!Again)
    return Again.takeError();
  if (*Again != Air)
    return createStringError(inconvertibleErrorCode(),
                             "internal error: plan.air does not print back "
                             "to the same text");
  return Error::success();
}

/// Runs each pipeline on the plan's text; the programs as files of the
/// plan folder named Prefix<S>.air.
static Error addPrograms(const PlanFilesInput &In, StringRef PlanText,
                         ArrayRef<std::string> Pipelines, StringRef Prefix,
                         OutputFileList &Files) {
  for (unsigned S = 0; S != Pipelines.size(); ++S) {
    Expected<std::string> Program = runPipelineOnText(PlanText, Pipelines[S]);
    if (!Program)
      return Program.takeError();
    SmallString<256> Path(In.Options->OutputDir);
    sys::path::append(Path, Prefix + Twine(S) + ".air");
    Files.push_back({Path.str().str(), std::move(*Program)});
  }
  return Error::success();
}

Expected<OutputFileList> autopar::renderPlanFiles(const PlanFilesInput &In) {
  const PlanDriverOptions &O = *In.Options;
  const PlanConfig &C = In.Plans.front().Config;
  PlanRecord R = makeRecord(In);
  if (Error E = materializePlan(In, R))
    return E;
  // A plan that does not lower stands without programs: a note (a kind
  // of plan not lowered yet) or a warning (a lowering that failed), and
  // plan.air records no pipelines.
  auto NoPrograms = [&](bool Failed, const Twine &Why) {
    if (!O.CheckOnly)
      (Failed ? WithColor::warning(errs(), "autopar")
              : WithColor::note(errs(), "autopar"))
          << "no training programs in " << O.OutputDir << ": " << Why << "\n";
  };
  std::string Unlowered = getUnloweredReason(*In.M, C);
  if (Unlowered.empty()) {
    Expected<std::vector<std::string>> Pipelines =
        buildTrainingPipelines(*In.M, C);
    if (Pipelines)
      R.TrainingPipelines = std::move(*Pipelines);
    else
      NoPrograms(true, toString(Pipelines.takeError()));
  } else {
    NoPrograms(false, Unlowered);
  }
  // plan.air, and the training programs lowered from its text (which
  // records their pipelines).
  auto PrintPlan = [&] {
    In.M->getAttrs() = encodePlan(R);
    std::string Air;
    raw_string_ostream AOS(Air);
    printModule(AOS, *In.M);
    return AOS.str();
  };
  std::string Air = PrintPlan();
  OutputFileList Programs;
  if (Error E = addPrograms(In, Air, R.TrainingPipelines, "stage", Programs)) {
    NoPrograms(true, toString(std::move(E)));
    R.TrainingPipelines.clear();
    Programs.clear();
    Air = PrintPlan();
  }
  if (Error E = checkRoundTrip(Air))
    return E;

  SmallString<256> AirPath(O.OutputDir), JsonPath(O.OutputDir),
      LaunchDir(O.OutputDir), ReportPath(O.OutputDir);
  sys::path::append(AirPath, "plan.air");
  sys::path::append(JsonPath, "plan.json");
  sys::path::append(LaunchDir, "launch");
  sys::path::append(ReportPath, "report.html");
  OutputFileList Files = {{AirPath.str().str(), Air},
                          {JsonPath.str().str(), planToJSON(R)}};
  // The launch files, from the record as plan.json holds it.
  R.FileName = "plan.json";
  Expected<OutputFileList> Launch = renderLaunchFiles(R, LaunchDir);
  if (!Launch)
    return createStringError(inconvertibleErrorCode(),
                             "the launch files: " +
                                 toString(Launch.takeError()));
  for (auto &F : *Launch)
    Files.push_back(std::move(F));
  ReportInput Report;
  Report.Model = R.Model;
  Report.Cl = In.Cl;
  Report.Plans = In.Plans;
  Expected<std::string> Html = renderReport(Report);
  if (!Html)
    return createStringError(inconvertibleErrorCode(),
                             "the report: " + toString(Html.takeError()));
  Files.push_back({ReportPath.str().str(), std::move(*Html)});
  if (!In.WeightsFile.empty()) {
    SmallString<256> Path(O.OutputDir);
    sys::path::append(Path, WeightsFileName);
    Files.push_back({Path.str().str(), In.WeightsFile});
  }
  for (auto &F : Programs)
    Files.push_back(std::move(F));
  if (O.ForwardPrograms) {
    Expected<std::vector<std::string>> Forward = buildForwardPipelines(C);
    if (!Forward)
      return Forward.takeError();
    if (Error E = addPrograms(In, Air, *Forward, "forward", Files))
      return E;
  }
  return Files;
}
