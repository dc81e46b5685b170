//===- Explain.cpp - Where a plan's time and memory go --------------------===//
//
// `autopar explain MODEL DIR [--what-if k=v,...]` prints, for the plan in
// DIR (or that plan with the what-if changes, cut again when the change
// moves the stages):
//   - the step's parts (the pipeline with its bubble, data-parallel sync,
//     optimizer, offload), then the busiest rank's sends and receives
//     between stages and the data-parallel sync by collective;
//   - each pipeline rank's busy time and memory;
//   - the layers of the busiest rank: forward and backward (compute with
//     the tensor-parallel collectives), each collective kind that occurs
//     there (forward plus backward), recomputation;
//   - the ops of one of those layers (the first repeated block, if any):
//     each op's split, time and kept bytes on one rank as test-print-cost
//     prints them, and the collectives the sharding solver places at it
//     (passes/ShardingSolver.h, PlacedCollective).
// The critical path of a synchronous pipeline step is the busiest rank plus
// the bubble it waits in, then the slowest rank's data-parallel tail.
//
//===----------------------------------------------------------------------===//

#include "driver/Explain.h"

#include "cost/Collectives.h"
#include "ir/Graph.h"

#include "llvm/Support/Format.h"

using namespace autopar;
using namespace llvm;

static constexpr double GiB = double(1ull << 30);
static constexpr double MiB = double(1ull << 20);

Error autopar::applyWhatIf(PlanConfig &C, StringRef WhatIf, unsigned NumGpus,
                           int64_t GlobalBatch) {
  Expected<PlanFixes> F = PlanFixes::parse(WhatIf);
  if (!F)
    return F.takeError();
  PlanConfig Before = C;
  F->applyTo(C);
  // What moves layers between stages: the stage cut is found again.
  bool Recut = C.TP != Before.TP || C.PP != Before.PP || C.VPP != Before.VPP ||
               C.MicroBatch != Before.MicroBatch ||
               C.Schedule != Before.Schedule ||
               C.Recomputation != Before.Recomputation ||
               C.SequenceParallel != Before.SequenceParallel;
  if (F->Schedule && *F->Schedule != ScheduleKind::Interleaved)
    C.VPP = 1;
  if (C.TP * C.PP == 0 || NumGpus % (C.TP * C.PP))
    return createStringError(inconvertibleErrorCode(),
                             "--what-if: tp x pp = " + Twine(C.TP * C.PP) +
                                 " does not divide the " + Twine(NumGpus) +
                                 " GPUs");
  C.DP = NumGpus / (C.TP * C.PP);
  if (F->DP && *F->DP != C.DP)
    return createStringError(inconvertibleErrorCode(),
                             "--what-if: dp is " + Twine(C.DP) +
                                 " with these tp and pp, not " + Twine(*F->DP));
  if (GlobalBatch % (C.MicroBatch * C.DP))
    return createStringError(
        inconvertibleErrorCode(),
        "--what-if: the global batch " + Twine(GlobalBatch) +
            " is not a multiple of mbs x dp = " + Twine(C.MicroBatch * C.DP));
  C.MicroBatches = GlobalBatch / (C.MicroBatch * C.DP);
  if (Recut)
    C.StageUnits.clear();
  return Error::success();
}

namespace {

/// A unit that a pipeline rank runs: its virtual stage and its index.
struct RankUnit {
  unsigned Stage, Unit;
};

} // namespace

static std::vector<RankUnit> unitsOfRank(const PlanConfig &C, unsigned Rank,
                                         unsigned NumUnits) {
  std::vector<RankUnit> Out;
  unsigned First = 0;
  for (unsigned J = 0; J != C.StageUnits.size(); ++J) {
    unsigned End = First + C.StageUnits[J];
    if (J % C.PP == Rank)
      for (unsigned U = First; U != End && U < NumUnits; ++U)
        Out.push_back({J, U});
    First = End;
  }
  return Out;
}

/// Rank Rank's sends and receives between stages in one step.
static void printSends(raw_ostream &OS, const PlanConfig &C,
                       const PlanPrediction &R, unsigned Rank) {
  OS << "  sends and receives between stages, rank " << Rank << ": ";
  if (C.PP < 2) {
    OS << "none (pp=1)\n";
    return;
  }
  if (R.P2PSeconds > 0) {
    OS << format("overlapped with compute; each delays its receiver %.4g s\n",
                 R.P2PSeconds);
    return;
  }
  // A chunk's forward sends its output on (but on the last stage), its
  // backward sends its input's gradient back (but on the first).
  double Seconds = 0;
  unsigned Sends = 0;
  unsigned Last = R.StageSendSeconds.size();
  for (unsigned J = Rank; J < Last; J += C.PP) {
    unsigned N = (J + 1 != Last) + (J != 0);
    Seconds += N * R.StageSendSeconds[J] * C.MicroBatches;
    Sends += N * unsigned(C.MicroBatches);
  }
  OS << format("%.4g s in %u send%s, part of its busy time\n", Seconds, Sends,
               Sends == 1 ? "" : "s");
}

/// The data-parallel sync by collective, on the rank that finishes last.
static void printDpSync(raw_ostream &OS, const PlanConfig &C,
                        const PlanPrediction &R) {
  OS << "  data-parallel sync (dp=" << C.DP << ", zero=" << C.Zero << "):";
  bool Any = false;
  for (unsigned K = 0; K != NumCollectives; ++K) {
    if (R.DpCollectiveSeconds[K] <= 0)
      continue;
    OS << (Any ? " +" : "") << ' ' << getCollectiveName(Collective(K))
       << format(" %.4g s", R.DpCollectiveSeconds[K]);
    Any = true;
  }
  if (!Any)
    OS << " no collective";
  OS << format(", %.4g s of it not hidden by compute, %.4g s lost by the "
               "compute that hides it (%.3g slower while overlapped); "
               "tensor-parallel all-reduce of replicated gradients %.4g s\n",
               R.DpSyncSeconds - R.TpGradSyncSeconds -
                   R.DpOverlapSlowdownSeconds,
               R.DpOverlapSlowdownSeconds, OverlappedComputeSlowdown,
               R.TpGradSyncSeconds);
}

static double recomputeSeconds(const PlanConfig &C, const UnitCost &UC,
                               bool Ends) {
  if (Ends)
    return 0;
  if (C.Recomputation == Recompute::Full)
    return UC.FwdSeconds;
  if (C.Recomputation == Recompute::Selective)
    return UC.AttentionCoreSeconds;
  return 0;
}

static double unitCollectiveSeconds(const UnitCost &UC, unsigned Kind) {
  return UC.FwdCollectiveSeconds[Kind] + UC.BwdCollectiveSeconds[Kind];
}

/// The layers of rank Rank, one row each, with a column per collective
/// kind that takes time there.
static void printLayers(raw_ostream &OS, const PlanConfig &C,
                        ArrayRef<LayerUnit> Units,
                        const std::vector<UnitCost> &Costs,
                        ArrayRef<RankUnit> Mine, unsigned Rank) {
  SmallVector<unsigned, 4> Kinds;
  for (unsigned K = 0; K != NumCollectives; ++K)
    if (any_of(Mine, [&](RankUnit RU) {
          return unitCollectiveSeconds(Costs[RU.Unit], K) > 0;
        }))
      Kinds.push_back(K);
  OS << "layers of rank " << Rank
     << ", one micro-batch (s): forward and backward with their "
        "collectives, each collective (forward + backward), recomputation\n";
  OS.indent(21) << ' ' << right_justify("forward", 10) << ' '
                << right_justify("backward", 10);
  for (unsigned K : Kinds)
    OS << ' ' << right_justify(getCollectiveName(Collective(K)), 14);
  OS << ' ' << right_justify("recompute", 10) << '\n';
  for (RankUnit RU : Mine) {
    const UnitCost &UC = Costs[RU.Unit];
    bool Ends =
        Costs.size() > 2 && (RU.Unit == 0 || RU.Unit + 1 == Costs.size());
    OS << format("  stage %2u layer %4lld: %10.4g %10.4g", RU.Stage,
                 (long long)Units[RU.Unit].Layer, UC.FwdSeconds, UC.BwdSeconds);
    for (unsigned K : Kinds)
      OS << format(" %14.4g", unitCollectiveSeconds(UC, K));
    OS << format(" %10.4g\n", recomputeSeconds(C, UC, Ends));
  }
}

/// The layer whose ops to show: the first of Mine that is neither the
/// model's first unit nor its last, else the first.
static RankUnit representativeUnit(ArrayRef<RankUnit> Mine, unsigned NumUnits) {
  for (RankUnit RU : Mine)
    if (RU.Unit != 0 && RU.Unit + 1 != NumUnits)
      return RU;
  return Mine.front();
}

static void printCollective(raw_ostream &OS, const Node &N,
                            const PlacedCollective &PC) {
  OS << "      " << (PC.Backward ? "backward " : "forward ")
     << getCollectiveName(PC.Kind);
  if (PC.Count > 1)
    OS << " x" << PC.Count;
  if (const Value *V = PC.getValue(N))
    OS << " of %" << V->getName();
  OS << format(": %.4g MiB, %.3es\n", PC.Bytes / MiB, PC.Seconds);
}

/// Unit RU's ops on one rank: cost and kept bytes, then their collectives.
static void printOps(raw_ostream &OS, ModelProfile &Profile, const Cluster &Cl,
                     const PlanConfig &C, RankUnit RU) {
  OS << "ops of stage " << RU.Stage << " layer "
     << Profile.getUnits()[RU.Unit].Layer
     << " on one rank, one micro-batch: split, time, bytes kept for "
        "backward; the collectives at each\n";
  // Op times are the kernels' isolated rates divided by this.
  if (Cl.Device.SustainedFraction != 1)
    OS << "  (kernel times at " << format("%.4g", Cl.Device.SustainedFraction)
       << " of their isolated rates, the device's sustained fraction)\n";
  Expected<std::vector<OpCostDetail>> Ops =
      Profile.getOpCosts(RU.Unit, C.TP, C.SequenceParallel, C.MicroBatch);
  if (!Ops) {
    OS << "  (" << toString(Ops.takeError()) << ")\n";
    return;
  }
  for (const OpCostDetail &D : *Ops) {
    OS << "  ";
    printShardedNodeCost(OS, *D.N, D.Cost);
    for (const PlacedCollective &PC : D.Collectives)
      printCollective(OS, *D.N, PC);
  }
}

void autopar::printExplanation(raw_ostream &OS, const Plan &P,
                               ModelProfile &Profile, const Cluster &Cl) {
  const PlanConfig &C = P.Config;
  const PlanPrediction &R = P.Prediction;
  // The busiest rank is on the critical path.
  unsigned Busiest = 0;
  for (unsigned Rank = 0; Rank != R.Ranks.size(); ++Rank)
    if (R.Ranks[Rank].BusySeconds > R.Ranks[Busiest].BusySeconds)
      Busiest = Rank;
  OS << "plan: " << C.str() << " on " << Cl.NumGpus << " x " << Cl.Device.Name
     << "\n";
  OS << format("step %.4g s = pipeline %.4g s (idle %.1f%% on average: the "
               "bubble) + data-parallel sync %.4g s + optimizer %.4g s + "
               "offload %.4g s\n",
               R.StepSeconds, R.PipelineSeconds, 100 * R.BubbleFraction,
               R.DpSyncSeconds, R.OptimizerSeconds, R.OffloadSeconds);
  printSends(OS, C, R, Busiest);
  printDpSync(OS, C, R);
  OS << format("memory per GPU: peak %.2f GiB of %.2f GiB\n",
               R.PeakMemoryBytes / GiB, R.MemoryCapacityBytes / GiB);
  OS << "rank  busy (s)  states (GiB)  activations (GiB)  total (GiB)\n";
  for (unsigned Rank = 0; Rank != R.Ranks.size(); ++Rank) {
    const RankPrediction &RP = R.Ranks[Rank];
    OS << format("%4u  %8.4g  %12.3f  %17.3f  %11.3f%s\n", Rank, RP.BusySeconds,
                 RP.ModelStateBytes / GiB, RP.ActivationBytes / GiB,
                 RP.MemoryBytes / GiB,
                 Rank == Busiest ? "  <- critical path" : "");
  }

  Expected<const std::vector<UnitCost> *> CostsOr =
      Profile.getUnitCosts(C.TP, C.SequenceParallel, C.MicroBatch);
  if (!CostsOr) {
    consumeError(CostsOr.takeError());
    return;
  }
  const std::vector<UnitCost> &Costs = **CostsOr;
  std::vector<RankUnit> Mine = unitsOfRank(C, Busiest, Costs.size());
  printLayers(OS, C, Profile.getUnits(), Costs, Mine, Busiest);
  if (!Mine.empty())
    printOps(OS, Profile, Cl, C, representativeUnit(Mine, Costs.size()));
}
