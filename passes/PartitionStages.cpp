//===- PartitionStages.cpp - Cut the layers into pipeline stages ----------===//
//
// partition-stages cuts the units (passes/LayerUnits.h: the embedding, the
// blocks, the head, in layer order) into `stages` x `vpp` contiguous
// virtual stages that minimize the slowest one's forward plus backward time
// on one rank (cost/OpCost.h for `gpu`, under the nodes' `sharding`
// annotations), and annotates every node of a unit with its virtual stage
// (`stage`; virtual stage j runs on pipeline rank j mod `stages`). With
// `memory-gib`, each rank must also hold its units' model states
// (mixed-precision Adam, 16 bytes per trained parameter element; frozen
// parameters at their own bytes, cost/HeldParams.h) and activations
// for the micro-batches a 1F1B schedule keeps in flight (stages - rank;
// with vpp > 1 each virtual stage gets 1/vpp of the memory). The search
// (planner/Search.cpp) uses the same cut (passes/StageCut.h) with its full
// memory model. With `from-plan`, the cut is the one the module's plan
// records (its stage_layers: units per virtual stage, PlanContext.h)
// rather than searched. Assumes static shapes and detect-layers'
// annotations.
//
//===----------------------------------------------------------------------===//

#include "passes/LayerUnits.h"
#include "passes/Passes.h"
#include "passes/PlanContext.h"
#include "passes/ShardGraph.h"
#include "passes/StageCut.h"

#include "cost/ActivationMemory.h"
#include "cost/HeldParams.h"
#include "ir/Graph.h"

#include "llvm/ADT/SmallPtrSet.h"
#include "llvm/Support/Format.h"
#include "llvm/Support/FormatVariadic.h"
#include "llvm/Support/raw_ostream.h"

using namespace autopar;
using namespace llvm;

namespace {

class PartitionStagesPass : public Pass {
public:
  PartitionStagesPass() {
    Options.bind("stages", &Stages, "Pipeline stages (ranks)");
    Options.bind("vpp", &Vpp, "Virtual stages per rank (interleaving)");
    Options.bind("gpu", &Gpu, "Device of the cost model");
    Options.bind("memory-gib", &MemoryGiB,
                 "Memory cap per rank in GiB (0: none)");
    Options.bind("axis", &Axis, "Mesh axis of the tensor-parallel group");
    Options.bind("print-summary", &PrintSummary,
                 "Print each stage's units and time to stdout");
    Options.bind("from-plan", &FromPlan,
                 "Cut where the module's plan says (its stage_layers)");
  }
  StringRef getArgument() const override { return "partition-stages"; }

  Error validateOptions() override {
    if (Stages < 1 || Vpp < 1)
      return createStringError(inconvertibleErrorCode(),
                               "stages and vpp must be at least 1");
    if (MemoryGiB < 0)
      return createStringError(inconvertibleErrorCode(),
                               "memory-gib must not be negative");
    if (!lookupDevice(Gpu))
      return createStringError(inconvertibleErrorCode(),
                               "unknown gpu '" + Gpu + "'");
    return Error::success();
  }

  LogicalResult run(Module &M, DiagnosticEngine &Diag) override {
    std::vector<unsigned> PlanCut;
    if (FromPlan) {
      std::optional<PlanContext> P =
          readPlanContext(M, "partition-stages", Diag);
      if (!P)
        return failure();
      PlanCut = P->config().StageUnits;
    }
    for (const std::unique_ptr<Graph> &G : M.getGraphs())
      if (failed(FromPlan ? annotateCut(*G, PlanCut, Diag)
                          : partition(*G, Diag)))
        return failure();
    return success();
  }

private:
  LogicalResult partition(Graph &G, DiagnosticEngine &Diag);
  /// Annotates the units of G with the virtual stages of Cut (units per
  /// virtual stage, in order).
  LogicalResult annotateCut(Graph &G, ArrayRef<unsigned> Cut,
                            DiagnosticEngine &Diag);

  int64_t Stages = 1, Vpp = 1;
  std::string Gpu = "a100-80gb";
  double MemoryGiB = 0;
  std::string Axis = "tp";
  bool PrintSummary = false;
  bool FromPlan = false;
};

/// One unit's time and memory on one rank, for one micro-batch.
struct UnitFigures {
  double Seconds = 0;
  /// Trained parameter elements (16 bytes each: cost/ModelState.h), and the
  /// bytes of the frozen parameters, held at their own element types
  /// (cost/HeldParams.h).
  double ParamElements = 0;
  double FrozenBytes = 0;
  double ActivationBytes = 0;
};

/// Annotates each node of Units with its virtual stage under Cut (units per
/// virtual stage, in order; they sum to Units.size()).
static void annotateStages(Graph &G, ArrayRef<LayerUnit> Units,
                           ArrayRef<unsigned> Cut) {
  DenseMap<const Node *, unsigned> StageOf;
  unsigned Unit = 0;
  for (unsigned Stage = 0; Stage != Cut.size(); ++Stage)
    for (unsigned I = 0; I != Cut[Stage]; ++I, ++Unit)
      for (const Node *N : Units[Unit].Nodes)
        StageOf[N] = Stage;
  for (Node &N : G.getNodes()) {
    auto It = StageOf.find(&N);
    if (It != StageOf.end())
      N.getAttrs().set("stage", Attribute::getInt(It->second));
  }
}

LogicalResult PartitionStagesPass::partition(Graph &G, DiagnosticEngine &Diag) {
  for (const Node &N : G.getNodes())
    for (unsigned R = 0, E = N.getNumResults(); R != E; ++R)
      if (N.getResult(R) && !N.getResult(R)->getType().hasStaticShape()) {
        Diag.error(N, "partition-stages needs static shapes; run "
                      "require-static-shapes first");
        return failure();
      }
  GradientFlow Flow(G);
  std::vector<LayerUnit> Units = getLayerUnits(G, Flow);
  unsigned Chunks = unsigned(Stages * Vpp);
  if (Units.size() < Chunks) {
    Diag.error(SMLoc(), "partition-stages: stages=" + Twine(Stages) +
                            " x vpp=" + Twine(Vpp) + " needs " + Twine(Chunks) +
                            " layers; '@" + G.getName() + "' has " +
                            Twine(Units.size()) + " (run detect-layers first)");
    return failure();
  }
  const DeviceSpec &Device = *lookupDevice(Gpu);
  CostSettings Settings;
  std::vector<UnitFigures> Figures;
  std::vector<double> Time;
  for (const LayerUnit &U : Units) {
    UnitFigures F;
    for (const Node *N : U.Nodes) {
      std::optional<OpLoops> L = getOpLoops(*N);
      NodeCost C = getNodeCost(*N, L, getAnnotatedSplit(*N, L, Axis), Device,
                               Settings, Flow);
      F.Seconds += C.FwdSeconds + C.BwdSeconds;
    }
    auto SplitOf = [&](unsigned K) {
      const Node &N = *U.Nodes[K];
      return getAnnotatedSplit(N, getOpLoops(N), Axis);
    };
    F.ParamElements = sumElements(getHeldParams(U.Nodes, SplitOf, Flow));
    F.FrozenBytes = getFrozenParamBytes(U.Nodes, SplitOf, Flow);
    F.ActivationBytes = savedActivationBytes(
        U.Nodes,
        [&](const Node &N) {
          return getAnnotatedSplit(N, getOpLoops(N), Axis);
        },
        Recompute::None, Flow, Settings);
    Time.push_back(F.Seconds);
    Figures.push_back(F);
  }
  double Cap = MemoryGiB * double(1ull << 30) / Vpp;
  auto Fits = [&](unsigned Chunk, unsigned Begin, unsigned End) {
    if (MemoryGiB <= 0)
      return true;
    unsigned InFlight = unsigned(Stages) - Chunk % unsigned(Stages);
    double Bytes = 0;
    for (unsigned U = Begin; U != End; ++U)
      Bytes += 16 * Figures[U].ParamElements + Figures[U].FrozenBytes +
               InFlight * Figures[U].ActivationBytes;
    return Bytes <= Cap;
  };
  std::optional<std::vector<unsigned>> Cut = cutStages(Time, Chunks, Fits);
  if (!Cut) {
    Diag.error(SMLoc(),
               "partition-stages: no cut of '@" + G.getName() + "' into " +
                   Twine(Chunks) +
                   " stages fits memory-gib=" + formatv("{0}", MemoryGiB) +
                   " per rank; add stages or memory");
    return failure();
  }
  annotateStages(G, Units, *Cut);
  if (!PrintSummary)
    return success();
  unsigned First = 0;
  for (unsigned J = 0; J != Cut->size(); ++J) {
    double Seconds = 0;
    for (unsigned U = First; U != First + (*Cut)[J]; ++U)
      Seconds += Time[U];
    outs() << "stage " << J << " (rank " << J % Stages << "): layers "
           << Units[First].Layer << ".." << Units[First + (*Cut)[J] - 1].Layer
           << format(" time=%.3es\n", Seconds);
    First += (*Cut)[J];
  }
  return success();
}

LogicalResult PartitionStagesPass::annotateCut(Graph &G, ArrayRef<unsigned> Cut,
                                               DiagnosticEngine &Diag) {
  GradientFlow Flow(G);
  std::vector<LayerUnit> Units = getLayerUnits(G, Flow);
  unsigned Total = 0;
  for (unsigned Size : Cut)
    Total += Size;
  if (Cut.empty() || Total != Units.size()) {
    Diag.error(SMLoc(), "partition-stages: the plan's cut has " +
                            Twine(Cut.size()) + " stages over " + Twine(Total) +
                            " units; '@" + G.getName() + "' has " +
                            Twine(Units.size()) +
                            " (run detect-layers as the plan did)");
    return failure();
  }
  annotateStages(G, Units, Cut);
  return success();
}

} // namespace

std::unique_ptr<Pass> autopar::createPartitionStagesPass() {
  return std::make_unique<PartitionStagesPass>();
}
