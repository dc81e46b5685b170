//===- Explain.cpp - Where a plan's time and memory go --------------------===//
//
// `autopar explain MODEL DIR [--what-if k=v,...]` prints, for the plan in
// DIR (or that plan with the what-if changes, cut again when the change
// moves the stages): the step's parts (compute with tensor-parallel
// communication and recomputation, bubble, data-parallel sync, optimizer,
// offload), each pipeline rank's busy time and memory, and the layers of
// the busiest rank with their forward, backward, communication and
// recomputation times. The critical path of a synchronous pipeline step is
// the busiest rank plus the bubble it waits in, then the slowest rank's
// data-parallel tail.
//
//===----------------------------------------------------------------------===//

#include "driver/Explain.h"

#include "llvm/Support/Format.h"

using namespace autopar;
using namespace llvm;

static constexpr double GiB = double(1ull << 30);

Error autopar::applyWhatIf(PlanConfig &C, StringRef WhatIf, unsigned NumGpus,
                           int64_t GlobalBatch) {
  Expected<PlanFixes> F = PlanFixes::parse(WhatIf);
  if (!F)
    return F.takeError();
  bool Recut = false;
  auto Set = [&](auto &Field, const auto &Value) {
    if (Value) {
      Recut |= Field != *Value;
      Field = *Value;
    }
  };
  Set(C.TP, F->TP);
  Set(C.PP, F->PP);
  Set(C.VPP, F->VPP);
  Set(C.MicroBatch, F->MicroBatch);
  Set(C.Schedule, F->Schedule);
  Set(C.Recomputation, F->Recomputation);
  Set(C.SequenceParallel, F->SequenceParallel);
  if (F->Zero)
    C.Zero = *F->Zero;
  if (F->Offload)
    C.Offload = *F->Offload;
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

void autopar::printExplanation(raw_ostream &OS, const Plan &P,
                               ModelProfile &Profile, const Cluster &Cl) {
  const PlanConfig &C = P.Config;
  const PlanPrediction &R = P.Prediction;
  OS << "plan: " << C.str() << " on " << Cl.NumGpus << " x " << Cl.Device.Name
     << "\n";
  OS << format("step %.4g s = pipeline %.4g s (idle %.1f%% on average: the "
               "bubble) + data-parallel sync %.4g s + optimizer %.4g s + "
               "offload %.4g s\n",
               R.StepSeconds, R.PipelineSeconds, 100 * R.BubbleFraction,
               R.DpSyncSeconds, R.OptimizerSeconds, R.OffloadSeconds);
  OS << format("memory per GPU: peak %.2f GiB of %.2f GiB\n",
               R.PeakMemoryBytes / GiB, R.MemoryCapacityBytes / GiB);

  Expected<const std::vector<UnitCost> *> CostsOr =
      Profile.getUnitCosts(C.TP, std::min<unsigned>(C.TP, Cl.GpusPerNode),
                           C.SequenceParallel, C.MicroBatch);
  if (!CostsOr) {
    consumeError(CostsOr.takeError());
    return;
  }
  const std::vector<UnitCost> &Costs = **CostsOr;
  // Per rank: busy time and memory; the busiest rank's layers.
  unsigned Busiest = 0;
  for (unsigned Rank = 0; Rank != R.Ranks.size(); ++Rank) {
    const RankPrediction &RP = R.Ranks[Rank];
    if (RP.BusySeconds > R.Ranks[Busiest].BusySeconds)
      Busiest = Rank;
  }
  OS << "rank  busy (s)  states (GiB)  activations (GiB)  total (GiB)\n";
  for (unsigned Rank = 0; Rank != R.Ranks.size(); ++Rank) {
    const RankPrediction &RP = R.Ranks[Rank];
    OS << format("%4u  %8.4g  %12.3f  %17.3f  %11.3f%s\n", Rank, RP.BusySeconds,
                 RP.ModelStateBytes / GiB, RP.ActivationBytes / GiB,
                 RP.MemoryBytes / GiB,
                 Rank == Busiest ? "  <- critical path" : "");
  }
  OS << "layers of rank " << Busiest
     << ", one micro-batch (s): forward, backward, of which "
        "tensor-parallel communication, recomputation\n";
  ArrayRef<LayerUnit> Units = Profile.getUnits();
  unsigned First = 0;
  for (unsigned J = 0; J != C.StageUnits.size(); ++J) {
    unsigned End = First + C.StageUnits[J];
    if (J % C.PP == Busiest)
      for (unsigned U = First; U != End && U < Costs.size(); ++U) {
        const UnitCost &UC = Costs[U];
        bool Ends = Costs.size() > 2 && (U == 0 || U + 1 == Costs.size());
        double Recompute = Ends                                 ? 0
                           : C.Recomputation == Recompute::Full ? UC.FwdSeconds
                           : C.Recomputation == Recompute::Selective
                               ? UC.AttentionCoreSeconds
                               : 0;
        OS << format("  stage %2u layer %4lld: %10.4g %10.4g %10.4g %10.4g\n",
                     J, (long long)Units[U].Layer, UC.FwdSeconds, UC.BwdSeconds,
                     UC.FwdCommSeconds + UC.BwdCommSeconds, Recompute);
      }
    First = End;
  }
}
