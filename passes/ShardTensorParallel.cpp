//===- ShardTensorParallel.cpp - Tensor-parallel layout by exact search ---===//
//
// shard-tp lays every node out over a tensor-parallel group of `degree`
// ranks with the sharding solver (passes/ShardingSolver.h) and records the
// result as `sharding` annotations over a mesh `@tp = [tp = degree]`: each
// result split on one dimension, replicated, or a partial sum. Layers
// (the `layer` annotation of detect-layers; one unit when there is none)
// with the same structure are solved once. The boundary between layers (the
// residual stream) is replicated, or with `sp` split along a token
// dimension when that is faster; the first unit reads replicated graph
// inputs and the last unit returns replicated outputs (or logits split over
// the vocabulary for a parallel cross-entropy, with `loss`). Nodes that read
// no activation are computed once, replicated, and not annotated. With
// `from-plan`, the degree, `sp`, the cluster (with its calibration) and the
// precision and attention kernel the costs are priced in are the plan's
// that the module records (PlanContext.h), and the annotations are over the
// plan's mesh @cluster = [pp, dp, tp]: the layout the search chose. Assumes
// static shapes (require-static-shapes) and verified input.
//
//===----------------------------------------------------------------------===//

#include "passes/LayerUnits.h"
#include "passes/Passes.h"
#include "passes/PlanContext.h"
#include "passes/ShardGraph.h"

#include "cost/Cluster.h"
#include "ir/Graph.h"
#include "ir/OpLoops.h"

#include "llvm/ADT/SmallPtrSet.h"
#include "llvm/ADT/StringMap.h"
#include "llvm/Support/Format.h"
#include "llvm/Support/raw_ostream.h"

#include <map>
#include <set>

using namespace autopar;
using namespace llvm;

namespace {

struct ShardOptions {
  int64_t Degree = 2;
  bool SequenceParallel = false;
  std::string Gpu = "a100-80gb";
  int64_t GpusPerNode = 0;
  int64_t MicroBatches = 1;
  bool PrintSummary = false;
  bool Loss = true;
  bool Exhaustive = false;
  bool FromPlan = false;
};

class ShardTensorParallelPass : public Pass {
public:
  ShardTensorParallelPass() {
    Options.bind("degree", &Opts.Degree, "Ranks of the tensor-parallel group");
    Options.bind("sp", &Opts.SequenceParallel,
                 "Allow sequence parallelism (split token dimensions)");
    Options.bind("gpu", &Opts.Gpu, "Device of the cost model");
    Options.bind("gpus-per-node", &Opts.GpusPerNode,
                 "GPUs per node (0: the device's usual node)");
    Options.bind("micro-batches", &Opts.MicroBatches,
                 "Micro-batches per step (amortizes gradient all-reduces)");
    Options.bind("loss", &Opts.Loss,
                 "The graph's outputs feed a cross-entropy loss (logits may "
                 "stay split over the vocabulary)");
    Options.bind("exhaustive", &Opts.Exhaustive,
                 "Prune the solver's states by dominance only (slower; the "
                 "same solution, which tests check)");
    Options.bind("print-summary", &Opts.PrintSummary,
                 "Print each unit's time and collectives to stdout");
    Options.bind("from-plan", &Opts.FromPlan,
                 "Lay the graph out as the module's plan says (its tp, sp, "
                 "cluster and precision), over the plan's mesh");
  }

  StringRef getArgument() const override { return "shard-tp"; }

  Error validateOptions() override {
    if (Opts.Degree < 1 || Opts.Degree > MaxGpusPerNode)
      return createStringError(inconvertibleErrorCode(),
                               "degree must be between 1 and " +
                                   Twine(MaxGpusPerNode));
    if (Opts.MicroBatches < 1)
      return createStringError(inconvertibleErrorCode(),
                               "micro-batches must be at least 1");
    Expected<Cluster> C =
        makeCluster(Opts.Gpu, Opts.Degree,
                    Opts.GpusPerNode ? Opts.GpusPerNode
                                     : std::min<int64_t>(Opts.Degree, 8));
    if (!C)
      return C.takeError();
    Cl = std::move(*C);
    return Error::success();
  }

  LogicalResult run(Module &M, DiagnosticEngine &Diag) override {
    Layout L{&Cl,
             CostSettings(),
             {unsigned(Opts.Degree),
              unsigned(std::min<int64_t>(Opts.Degree, Cl.GpusPerNode))},
             Opts.SequenceParallel,
             "tp",
             "tp"};
    std::optional<PlanContext> Plan;
    if (Opts.FromPlan) {
      Plan = readPlanContext(M, "shard-tp", Diag);
      if (!Plan)
        return failure();
      const PlanConfig &C = Plan->config();
      L.Cl = &Plan->Cl;
      L.Settings.Compute = C.TrainPrecision;
      L.Settings.Attention = C.Attention;
      L.Group = getRankGroup(C.TP, 1, Plan->Cl.GpusPerNode);
      L.SequenceParallel = C.SequenceParallel && C.TP > 1;
      L.Mesh = PlanMeshName;
      L.Axis = TensorParallelAxis;
    }
    for (const std::unique_ptr<Graph> &G : M.getGraphs()) {
      if (Plan)
        addPlanMesh(*G, Plan->config());
      if (failed(shard(*G, L, Diag)))
        return failure();
    }
    return success();
  }

private:
  /// What the layout is priced on and annotated over.
  struct Layout {
    const Cluster *Cl;
    CostSettings Settings;
    CommGroup Group;
    bool SequenceParallel;
    std::string Mesh, Axis;
  };
  LogicalResult shard(Graph &G, const Layout &L, DiagnosticEngine &Diag);

  ShardOptions Opts;
  Cluster Cl;
};

LogicalResult ShardTensorParallelPass::shard(Graph &G, const Layout &L,
                                             DiagnosticEngine &Diag) {
  for (const Node &N : G.getNodes())
    for (unsigned R = 0, E = N.getNumResults(); R != E; ++R)
      if (N.getResult(R) && !N.getResult(R)->getType().hasStaticShape()) {
        Diag.error(N, "shard-tp needs static shapes; run "
                      "require-static-shapes first and bind the symbols "
                      "with --dim");
        return failure();
      }
  GradientFlow Flow(G);
  std::vector<LayerUnit> Units = getLayerUnits(G, Flow);
  GraphShardingOptions Options;
  Options.Group = L.Group;
  Options.SplitTokens = L.SequenceParallel;
  Options.OutputsFeedLoss = Opts.Loss;
  Options.MicroBatches = Opts.MicroBatches;
  Options.Exhaustive = Opts.Exhaustive;
  Options.Cl = L.Cl;
  Options.Settings = &L.Settings;
  Options.Flow = &Flow;
  Expected<std::unique_ptr<GraphSharding>> Sharding =
      shardGraph(G, Units, Options);
  if (!Sharding) {
    Diag.error(SMLoc(), toString(Sharding.takeError()));
    return failure();
  }
  StringMap<unsigned> ClassCount;
  for (const LayerUnit &U : Units)
    ++ClassCount[U.Signature];
  if (!G.lookupMesh(L.Mesh)) {
    Mesh TP;
    TP.Name = L.Mesh;
    TP.Axes = {{L.Axis, int64_t(L.Group.Size)}};
    G.addMesh(std::move(TP));
  }
  std::set<std::string> Printed;
  for (unsigned I = 0; I != Units.size(); ++I) {
    const LayerUnit &U = Units[I];
    const ShardingSolution &Sol = *(*Sharding)->Units[I];
    if (Opts.PrintSummary && Printed.insert(U.Signature).second)
      outs() << "unit " << U.Layer << " x" << ClassCount[U.Signature]
             << ": allreduce=" << Sol.AllReduces
             << " allgather=" << Sol.AllGathers
             << " reducescatter=" << Sol.ReduceScatters
             << " alltoall=" << Sol.AllToAlls
             << format(" fwd=%.3gs bwd=%.3gs comm=%.3gs", Sol.FwdComputeSeconds,
                       Sol.BwdComputeSeconds,
                       Sol.FwdCommSeconds + Sol.BwdCommSeconds)
             << '\n';
  }
  annotateSharding(G, Units, **Sharding, L.Mesh, L.Axis);
  return success();
}

} // namespace

std::unique_ptr<Pass> autopar::createShardTensorParallelPass() {
  return std::make_unique<ShardTensorParallelPass>();
}
