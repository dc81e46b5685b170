//===- Search.cpp - One search over every parallelization choice ----------===//
//
// The step time of a candidate (docs/Planner.md, "Pipeline and search"):
//   pipeline  simulated schedule of the stages' forward and backward times
//             (compute, tensor-parallel collectives, recomputation) with
//             point-to-point sends between stages;
//   + the slowest rank's data-parallel gradient reduction (all-reduce, or
//     reduce-scatter and all-gather with ZeRO), the part not hidden behind
//     the last micro-batch's backward when overlapped, ZeRO-3's per
//     micro-batch parameter gathers not hidden behind compute, offload
//     transfers, and the optimizer step;
// Memory per rank: model states (cost/ModelState.h) of its units, the
// activations of its units times the micro-batches in flight (from the
// simulation), the working set of recomputation, the loss's logits, and a
// fixed framework allowance.
//
//===----------------------------------------------------------------------===//

#include "planner/Search.h"

#include "cost/Collectives.h"
#include "ir/BackendCapabilities.h"
#include "ir/PipelineOrder.h"
#include "passes/StageCut.h"

#include "llvm/ADT/DenseSet.h"
#include "llvm/ADT/STLExtras.h"
#include "llvm/ADT/StringExtras.h"
#include "llvm/Support/FormatVariadic.h"
#include "llvm/Support/MathExtras.h"
#include "llvm/Support/WithColor.h"
#include "llvm/Support/raw_ostream.h"

#include <algorithm>
#include <cmath>
#include <iterator>
#include <limits>
#include <map>
#include <numeric>

using namespace autopar;
using namespace llvm;

static Error error(const Twine &Message) {
  return createStringError(inconvertibleErrorCode(), Message);
}

//===----------------------------------------------------------------------===//
// Fixes and configurations
//===----------------------------------------------------------------------===//

Precision autopar::defaultTrainingPrecision(const DeviceSpec &Device) {
  return Device.PeakFlops(Precision::BF16) > Device.PeakFlops(Precision::FP32)
             ? Precision::BF16
             : Precision::FP32;
}

AttentionKernel autopar::defaultAttentionKernel(const DeviceSpec &Device,
                                                Precision Train) {
  bool Gpu = Device.Name != "cpu";
  return Gpu && (Train == Precision::BF16 || Train == Precision::FP16) &&
                 hasCapability(getPlanBackend(Device.Name),
                               Capability::FlashAttention)
             ? AttentionKernel::Flash
             : AttentionKernel::Materialized;
}

Error autopar::checkCapabilities(const Cluster &Cl, const PlanConfig &C,
                                 StringRef Given, bool WarnUnpriced) {
  RuntimeBackend B = getPlanBackend(Cl.Device.Name);
  std::optional<Capability> Missing =
      findCapability(B, C, CapabilitySupport::None);
  if (!Missing) {
    if (std::optional<Capability> Slow =
            findCapability(B, C, CapabilitySupport::Unpriced);
        Slow && WarnUnpriced)
      WithColor::warning(errs(), "autopar")
          << Given << " " << getCapabilityChoice(*Slow) << ": the "
          << getBackendName(B) << " backend's " << getCapabilityWhat(*Slow)
          << " runs slower than the cost model prices it "
             "(ir/BackendCapabilities.def): the predicted step time is "
             "optimistic\n";
    return Error::success();
  }
  return error(Given + " " + getCapabilityChoice(*Missing) + ": the " +
               getBackendName(B) + " backend, which runs plans for " +
               Cl.Device.Name + ", has no " + getCapabilityWhat(*Missing) +
               " yet (ir/BackendCapabilities.def); choose another");
}

/// Whether the search may evaluate C on B: B runs every choice of C, and
/// runs as priced every one but the attention kernel.
static bool isSearchable(RuntimeBackend B, const PlanConfig &C) {
  for (Capability Need : getRequiredCapabilities(C)) {
    CapabilitySupport S = getCapabilitySupport(B, Need);
    bool Attention = Need == Capability::FlashAttention ||
                     Need == Capability::MaterializedAttention;
    if (S == CapabilitySupport::None ||
        (S == CapabilitySupport::Unpriced && !Attention))
      return false;
  }
  return true;
}

double autopar::frameworkOverheadBytes(const Cluster &Cl) {
  // 1 GiB for the CUDA context, cuBLAS workspaces and NCCL buffers, plus 5%
  // of the device for allocator fragmentation: an allowance.
  return double(1ull << 30) + 0.05 * double(Cl.Device.MemoryBytes);
}

//===----------------------------------------------------------------------===//
// Evaluation
//===----------------------------------------------------------------------===//

namespace {

/// A candidate's pipeline: the cut, the per-chunk times and the simulation.
struct PipelineCandidate {
  std::vector<unsigned> StageUnits;
  std::vector<double> Fwd, Bwd; // per chunk, one micro-batch
  std::vector<double> Send;     // per chunk, one send
  double P2PSeconds = 0;        // what the simulation delayed receivers by
  PipelineResult Sim;
};

class Evaluator {
public:
  Evaluator(ModelProfile &Profile, const Cluster &Cl, const SearchOptions &O)
      : Profile(Profile), Cl(Cl), O(O) {}

  /// Evaluates C (all fields set but StageUnits, which may be empty).
  /// Returns nullopt when pruned by Bound or when it does not fit (then
  /// LeastMemory is lowered to what it needed).
  /// C's prediction, or none where it does not fit or cannot beat Bound.
  /// A GradBucket of 0 is chosen: Megatron-Core's bucket where it fits,
  /// else 25 MiB of fp32 gradients (ir/PlanKnobs.def).
  Expected<std::optional<Plan>> evaluate(const PlanConfig &C, double Bound);
  Expected<std::optional<Plan>> evaluateConfig(const PlanConfig &C,
                                               double Bound);

  double LeastMemory = std::numeric_limits<double>::infinity();
  /// The least host memory per GPU of the candidates that fit the device
  /// but not the host.
  double LeastHostMemory = std::numeric_limits<double>::infinity();
  uint64_t Evaluated = 0;

private:
  bool recomputes(unsigned Unit, unsigned NumUnits) const {
    return NumUnits <= 2 || (Unit != 0 && Unit + 1 != NumUnits);
  }
  double recomputeSeconds(const UnitCost &U, Recompute R) const {
    if (R == Recompute::Full)
      return U.FwdSeconds;
    if (R == Recompute::Selective)
      return U.AttentionCoreSeconds;
    return 0;
  }
  /// Memory of a rank that holds the units of Ranges (begin, end).
  RankPrediction rankMemory(const PlanConfig &C,
                            const std::vector<UnitCost> &Costs,
                            ArrayRef<std::pair<unsigned, unsigned>> Ranges,
                            unsigned InFlight) const;
  /// The unit ranges of pipeline rank Rank under a cut.
  static std::vector<std::pair<unsigned, unsigned>>
  rangesOf(const PlanConfig &C, const std::vector<unsigned> &StageUnits,
           unsigned Rank);

  /// The steps of evaluate. The per-unit costs of C's tensor-parallel
  /// degree and micro-batch (the first --keep-blocks repeated blocks).
  Expected<const std::vector<UnitCost> *> getCosts(const PlanConfig &C);
  /// One micro-batch's forward and backward per chunk under cut
  /// StageUnits, with the sends between stages, and the pipeline's
  /// simulation.
  Expected<PipelineCandidate>
  simulateCut(const PlanConfig &C, const std::vector<UnitCost> &Costs,
              ArrayRef<double> Fwd, ArrayRef<double> Bwd,
              const std::vector<unsigned> &StageUnits) const;
  /// Each pipeline rank's memory under a cut.
  std::vector<RankPrediction> getRankMemory(const PlanConfig &C,
                                            const std::vector<UnitCost> &Costs,
                                            const PipelineCandidate &P) const;
  /// What follows the pipeline on the slowest rank: data-parallel
  /// synchronization, ZeRO-3 gathers, offload and the optimizer step.
  struct StepTail {
    double Seconds = 0, Sync = 0, Optimizer = 0, Offload = 0, GradSync = 0;
    /// What the compute hiding Sync's collectives loses to them
    /// (OverlappedComputeSlowdown).
    double OverlapSlowdown = 0;
    double Kinds[NumCollectives] = {};
  };
  StepTail getStepTail(const PlanConfig &C, const std::vector<UnitCost> &Costs,
                       const PipelineCandidate &Pipe) const;
  /// ZeRO-3's all-gathers of Held over Group: one per use (the parameters
  /// one node reads first).
  double useGatherSeconds(ArrayRef<HeldParam> Held, double ElemBytes,
                          const CommGroup &Group) const;
  /// ZeRO-1/2's all-gathers of the parameters of Units (one rank's, in
  /// program order) at precision P: 16-bit copies in buckets of at most
  /// getDataParallelBucketElements, filled in first-use order, a larger
  /// parameter a bucket of its own; fp32 parameters one by one
  /// (passes/InsertGradSync.cpp); each one collective over Group.
  double paramGatherSeconds(const std::vector<UnitCost> &Costs,
                            ArrayRef<std::pair<unsigned, unsigned>> Units,
                            Precision P, const CommGroup &Group,
                            unsigned DP) const;
  /// The prediction of C under Pipe with the ranks' memory and the tail.
  Plan predict(const PlanConfig &C, const std::vector<UnitCost> &Costs,
               PipelineCandidate Pipe, std::vector<RankPrediction> Ranks,
               double PeakMemory, const StepTail &Tail) const;

  ModelProfile &Profile;
  const Cluster &Cl;
  const SearchOptions &O;
  std::map<std::tuple<unsigned, bool, int64_t, unsigned, unsigned, unsigned,
                      unsigned, int64_t>,
           std::optional<PipelineCandidate>>
      PipeMemo;
  /// getCosts' storage when --keep-blocks drops units.
  std::vector<UnitCost> Kept;
};

std::vector<std::pair<unsigned, unsigned>>
Evaluator::rangesOf(const PlanConfig &C, const std::vector<unsigned> &Cut,
                    unsigned Rank) {
  std::vector<std::pair<unsigned, unsigned>> Ranges;
  unsigned First = 0;
  for (unsigned J = 0; J != Cut.size(); ++J) {
    if (J % C.PP == Rank)
      Ranges.push_back({First, First + Cut[J]});
    First += Cut[J];
  }
  return Ranges;
}

/// How many micro-batches' forwards of the last stage run before its first
/// backward (ir/PipelineOrder.h): 1 for 1F1B, every one for GPipe and for
/// an interleaved schedule with as many micro-batches as ranks. Each keeps
/// its logits for the loss until then.
static unsigned lastStageForwardsInFlight(const PlanConfig &C) {
  unsigned Last = C.PP * C.VPP - 1, Forwards = 0;
  for (const PipelineAction &A :
       getRankOrder(C.Schedule, C.PP, C.VPP, C.MicroBatches, Last % C.PP)) {
    if (A.Stage != Last)
      continue;
    if (A.Backward)
      break;
    ++Forwards;
  }
  return std::max(1u, Forwards);
}

RankPrediction
Evaluator::rankMemory(const PlanConfig &C, const std::vector<UnitCost> &Costs,
                      ArrayRef<std::pair<unsigned, unsigned>> Ranges,
                      unsigned InFlight) const {
  RankPrediction R;
  double Params = heldParamElements(Costs, Ranges);
  double LargestParam = 0, Saved = 0, Working = 0, Loss = 0;
  // The rank's parameters in the order its units first read them, each
  // unit's uses apart.
  std::vector<HeldParam> Sequence;
  unsigned Base = 0;
  for (auto [Begin, End] : Ranges)
    for (unsigned U = Begin; U != End; ++U) {
      const UnitCost &Cost = Costs[U];
      unsigned Next = Base;
      for (HeldParam H : Cost.Held) {
        LargestParam = std::max(LargestParam, H.Elements);
        H.FirstReader += Base;
        Next = std::max(Next, H.FirstReader + 1);
        Sequence.push_back(H);
      }
      Base = Next;
      Recompute Mode =
          recomputes(U, Costs.size()) ? C.Recomputation : Recompute::None;
      Saved += Cost.SavedBytes[unsigned(Mode)];
      // A unit's backward holds the gradients of its activations on top
      // of what it keeps, and recomputing a unit holds its whole
      // activations for a moment. The attention core of selective
      // recomputation is recomputed inside AttentionGrad
      // (runtime/cpu/AttentionKernel.cpp row by row; the CUDA kernel in
      // the scratch that holds dS in every mode), so it adds nothing that
      // outlives a kernel.
      // Gathered values are whole in the recomputed forward.
      double Recomputed =
          Mode == Recompute::Full
              ? std::max(0.0,
                         Cost.RecomputedBytes - Cost.SavedBytes[unsigned(Mode)])
              : 0;
      Working = std::max(Working, Recomputed + Cost.BackwardExcessBytes);
      Loss += Cost.LossBytes;
    }
  ModelStateConfig MS;
  MS.Params = Params;
  MS.DataParallel = C.DP;
  MS.ZeroStage = C.Zero;
  MS.Optimizer = O.Optimizer;
  MS.Offload = C.Offload;
  setTrainingPrecision(MS, C.TrainPrecision);
  MS.LargestParam = LargestParam;
  MS.UsePairParams = largestNeighbourElements(Sequence, /*ByUse=*/true);
  MS.StepPairParams = largestNeighbourElements(Sequence, /*ByUse=*/false);
  MS.MicroBatches = C.MicroBatches;
  if (C.Zero >= 1 && C.DP > 1) {
    MS.WholeParams = std::min(Params, wholeElements(Sequence, C.DP));
    MS.PaddingParams = paddingElements(Sequence, C.DP);
  }
  // The bucket's fp32 gradients (the masters', or fp32 training's).
  MS.BucketBytes = double(C.GradBucket) * 4;
  ModelStateMemory States = getModelStateMemory(MS);
  // Frozen parameters (no gradient flows into them: quantized weights,
  // their scales and zero points, bool masks) are held at their own bytes,
  // split as their readers split them, with no gradient, optimizer state or
  // master copy. They are not sharded by ZeRO: DeepSpeed's ZeRO-3 partitions
  // frozen parameters too, but autopar's runtime does not
  // (passes/InsertGradSync.cpp shards the parameters that have a gradient,
  // and passes/InsertOptimizer.cpp places only those on the host or NVMe),
  // so they stay whole on the device under every ZeRO stage and offload, as
  // the plan runs them. The plan's weights include them, as the runtime's
  // measured parameters do.
  double Frozen = heldFrozenBytes(Costs, Ranges);
  R.ModelStateBytes = States.deviceBytes() + Frozen;
  R.WeightBytes = States.WeightBytes + States.GatherBufferBytes + Frozen;
  R.GradBytes = States.GradBytes;
  R.OptimizerBytes = States.OptimizerBytes;
  R.OffloadedBytes = States.HostBytes + States.NvmeBytes;
  R.HostBytes = States.HostBytes;
  R.OverheadBytes = frameworkOverheadBytes(Cl);
  // InFlight counts chunk activations; Saved covers all of the rank's
  // chunks for one micro-batch.
  // The loss's buffers are freed by the head's backward, before any layer
  // is recomputed: the two never add up.
  // Loss holds the logits and their gradient for one micro-batch; the
  // logits of every micro-batch whose loss waits for its backward are live
  // together.
  if (Loss > 0)
    Loss *= (1.0 + lastStageForwardsInFlight(C)) / 2;
  R.ActivationBytes = Saved / C.VPP * InFlight + std::max(Working, Loss);
  R.MemoryBytes =
      R.ModelStateBytes + R.ActivationBytes + frameworkOverheadBytes(Cl);
  return R;
}

/// The largest of the ranks' memory.
static double getPeakMemory(const std::vector<RankPrediction> &Ranks) {
  double M = 0;
  for (const RankPrediction &R : Ranks)
    M = std::max(M, R.MemoryBytes);
  return M;
}

Expected<std::optional<Plan>> Evaluator::evaluate(const PlanConfig &C,
                                                  double Bound) {
  if (C.GradBucket > 0)
    return evaluateConfig(C, Bound);
  // A larger bucket pays fewer latencies and costs only memory (the
  // bucket's copy while it is reduced, cost/ModelState.cpp).
  PlanConfig Small = C, Large = C;
  Small.GradBucket = PlanConfig().GradBucket;
  Large.GradBucket =
      std::max(Small.GradBucket, int64_t(getDataParallelBucketElements(C.DP)));
  if (C.DP <= 1 || Large.GradBucket == Small.GradBucket)
    return evaluateConfig(Small, Bound);
  Expected<std::optional<Plan>> P = evaluateConfig(Large, Bound);
  if (!P || *P)
    return P;
  return evaluateConfig(Small, Bound);
}

Expected<std::optional<Plan>> Evaluator::evaluateConfig(const PlanConfig &C,
                                                        double Bound) {
  Expected<const std::vector<UnitCost> *> CostsOr = getCosts(C);
  if (!CostsOr)
    return CostsOr.takeError();
  const std::vector<UnitCost> &Costs = **CostsOr;
  unsigned NumUnits = Costs.size();
  unsigned Chunks = C.PP * C.VPP;
  if (NumUnits < Chunks)
    return std::nullopt;
  std::vector<double> Fwd(NumUnits), Bwd(NumUnits), Time(NumUnits);
  double Total = 0;
  for (unsigned U = 0; U != NumUnits; ++U) {
    Recompute Mode =
        recomputes(U, NumUnits) ? C.Recomputation : Recompute::None;
    Fwd[U] = Costs[U].FwdSeconds;
    Bwd[U] = Costs[U].BwdSeconds + recomputeSeconds(Costs[U], Mode);
    Time[U] = Fwd[U] + Bwd[U];
    Total += Time[U];
  }
  // No rank can finish before its share of the work.
  if (double(C.MicroBatches) * Total / C.PP > Bound)
    return std::nullopt;
  ++Evaluated;

  auto Simulate = [&](const std::vector<unsigned> &StageUnits) {
    return simulateCut(C, Costs, Fwd, Bwd, StageUnits);
  };

  // The pipeline does not depend on ZeRO or offload: the balanced cut and
  // its simulation are shared by those candidates.
  auto Key = std::make_tuple(C.TP, C.SequenceParallel, C.MicroBatch, C.PP,
                             C.VPP, unsigned(C.Schedule),
                             unsigned(C.Recomputation), C.MicroBatches);
  std::vector<unsigned> Cut = C.StageUnits;
  std::optional<PipelineCandidate> Balanced;
  if (Cut.empty()) {
    auto Memo = PipeMemo.find(Key);
    if (Memo == PipeMemo.end()) {
      std::optional<PipelineCandidate> Entry;
      if (std::optional<std::vector<unsigned>> Part =
              cutStages(Time, Chunks,
                        [](unsigned, unsigned, unsigned) { return true; })) {
        Expected<PipelineCandidate> P = Simulate(*Part);
        if (!P)
          return P.takeError();
        Entry = std::move(*P);
      }
      Memo = PipeMemo.emplace(Key, std::move(Entry)).first;
    }
    if (!Memo->second)
      return std::nullopt;
    Balanced = Memo->second;
  } else if (Cut.size() != Chunks ||
             std::accumulate(Cut.begin(), Cut.end(), 0u) != NumUnits) {
    return error("the stage cut has " + Twine(Cut.size()) + " stages over " +
                 Twine(std::accumulate(Cut.begin(), Cut.end(), 0u)) +
                 " units; the plan needs " + Twine(Chunks) + " over " +
                 Twine(NumUnits));
  }
  Expected<PipelineCandidate> Pipe =
      Balanced ? Expected<PipelineCandidate>(std::move(*Balanced))
               : Simulate(Cut);
  if (!Pipe)
    return Pipe.takeError();

  double Capacity = double(Cl.Device.MemoryBytes);
  std::vector<RankPrediction> Ranks = getRankMemory(C, Costs, *Pipe);
  if (getPeakMemory(Ranks) > Capacity && C.StageUnits.empty() && C.PP > 1) {
    // Cut again under each rank's memory, with the in-flight counts of the
    // balanced schedule.
    std::vector<unsigned> InFlight = Pipe->Sim.PeakInFlight;
    // A chunk may use its rank's share of the memory beyond the allowance.
    double Overhead = frameworkOverheadBytes(Cl);
    double Budget = (Capacity - Overhead) / C.VPP;
    auto Fits = [&](unsigned Chunk, unsigned Begin, unsigned End) {
      std::pair<unsigned, unsigned> Range{Begin, End};
      RankPrediction R = rankMemory(C, Costs, Range, InFlight[Chunk % C.PP]);
      return R.MemoryBytes - Overhead <= Budget;
    };
    std::optional<std::vector<unsigned>> Tight = cutStages(Time, Chunks, Fits);
    if (Tight) {
      Expected<PipelineCandidate> Again = Simulate(*Tight);
      if (!Again)
        return Again.takeError();
      std::vector<RankPrediction> AgainRanks = getRankMemory(C, Costs, *Again);
      if (getPeakMemory(AgainRanks) <= Capacity) {
        Pipe = std::move(Again);
        Ranks = std::move(AgainRanks);
      }
    }
  }
  double PeakMemory = getPeakMemory(Ranks);
  if (PeakMemory > Capacity) {
    LeastMemory = std::min(LeastMemory, PeakMemory);
    return std::nullopt;
  }
  // What is offloaded must fit the host's memory too (each GPU's share).
  double HostCapacity = hostMemoryBytesPerGpu(Cl);
  if (HostCapacity > 0) {
    double Host = 0;
    for (const RankPrediction &R : Ranks)
      Host = std::max(Host, R.HostBytes);
    if (Host > HostCapacity) {
      LeastHostMemory = std::min(LeastHostMemory, Host);
      return std::nullopt;
    }
  }

  StepTail Tail = getStepTail(C, Costs, *Pipe);
  return std::optional<Plan>(
      predict(C, Costs, std::move(*Pipe), std::move(Ranks), PeakMemory, Tail));
}

Expected<const std::vector<UnitCost> *>
Evaluator::getCosts(const PlanConfig &C) {
  Expected<const std::vector<UnitCost> *> CostsOr =
      Profile.getUnitCosts(C.TP, C.SequenceParallel, C.MicroBatch);
  if (!CostsOr || !O.KeepBlocks)
    return CostsOr;
  const std::vector<UnitCost> *AllCosts = *CostsOr;
  std::vector<unsigned> Repeated = Profile.getRepeatedUnits();
  std::vector<bool> Drop(AllCosts->size());
  for (unsigned I = *O.KeepBlocks; I < Repeated.size(); ++I)
    Drop[Repeated[I]] = true;
  Kept.clear();
  for (unsigned U = 0; U != AllCosts->size(); ++U)
    if (!Drop[U])
      Kept.push_back((*AllCosts)[U]);
  return &Kept;
}

Expected<PipelineCandidate>
Evaluator::simulateCut(const PlanConfig &C, const std::vector<UnitCost> &Costs,
                       ArrayRef<double> Fwd, ArrayRef<double> Bwd,
                       const std::vector<unsigned> &StageUnits) const {
  // Neighbouring stages are TP x DP ranks apart (tensor-parallel ranks
  // innermost, then data-parallel, then pipeline, as Megatron-LM orders
  // them).
  bool StagesShareNode = C.TP * C.DP < Cl.GpusPerNode;
  CommGroup P2P{2, StagesShareNode ? 2u : 1u};
  CommGroup TpGroup = getRankGroup(C.TP, 1, Cl.GpusPerNode);
  PipelineCandidate P;
  P.StageUnits = StageUnits;
  double P2PSeconds = 0;
  unsigned First = 0;
  for (unsigned J = 0; J != StageUnits.size(); ++J) {
    unsigned Size = StageUnits[J];
    double F = 0, B = 0;
    for (unsigned U = First; U != First + Size; ++U) {
      F += Fwd[U];
      B += Bwd[U];
    }
    // Megatron-LM's sends and receives between stages block both ranks
    // (send_forward_recv_backward and friends) unless
    // --overlap-p2p-communication: each chunk's forward ends with sending
    // its output, each backward with sending the input's gradient.
    const UnitCost &Out = Costs[First + Size - 1];
    double Send = 0;
    if (C.PP > 1) {
      Send = collectiveSeconds(Cl, Collective::SendRecv, Out.OutputBytes, P2P);
      // Megatron-LM's scatter/gather (Narayanan et al. 2021, section
      // 4.1): a replicated activation goes as 1/tp per rank and is
      // all-gathered over NVLink on arrival.
      if (Out.OutputReplicated && C.TP > 1)
        Send = std::min(Send, collectiveSeconds(Cl, Collective::SendRecv,
                                                Out.OutputBytes / C.TP, P2P) +
                                  collectiveSeconds(Cl, Collective::AllGather,
                                                    Out.OutputBytes, TpGroup));
    }
    if (C.PP > 1 && C.VerifyTransfers)
      Send += verifyTransferSeconds(Cl, Out.OutputBytes);
    if (!O.OverlapP2P) {
      if (J + 1 != StageUnits.size())
        F += Send;
      if (J != 0)
        B += Send;
    }
    P.Fwd.push_back(F);
    P.Bwd.push_back(B);
    P.Send.push_back(Send);
    P2PSeconds = std::max(P2PSeconds, Send);
    First += Size;
  }
  PipelineSpec Spec;
  Spec.Kind = C.Schedule;
  Spec.Stages = C.PP;
  Spec.VirtualStages = C.VPP;
  Spec.MicroBatches = C.MicroBatches;
  Spec.Forward = P.Fwd;
  Spec.Backward = P.Bwd;
  // Overlapped sends still delay their receiver.
  Spec.P2PSeconds = O.OverlapP2P ? P2PSeconds : 0;
  P.P2PSeconds = Spec.P2PSeconds;
  Expected<PipelineResult> Sim = simulatePipeline(Spec);
  if (!Sim)
    return Sim.takeError();
  P.Sim = std::move(*Sim);
  return P;
}

std::vector<RankPrediction>
Evaluator::getRankMemory(const PlanConfig &C,
                         const std::vector<UnitCost> &Costs,
                         const PipelineCandidate &P) const {
  std::vector<RankPrediction> Ranks;
  for (unsigned R = 0; R != C.PP; ++R)
    Ranks.push_back(rankMemory(C, Costs, rangesOf(C, P.StageUnits, R),
                               P.Sim.PeakInFlight[R]));
  return Ranks;
}

double Evaluator::useGatherSeconds(ArrayRef<HeldParam> Held, double ElemBytes,
                                   const CommGroup &Group) const {
  double Seconds = 0;
  for (double Elements : getGroupElements(Held, /*ByUse=*/true))
    Seconds += collectiveSeconds(Cl, Collective::AllGather,
                                 Elements * ElemBytes, Group);
  return Seconds;
}

/// Calls Fn on each parameter the units Units hold, in program order, a
/// parameter several units hold once (SharedParams: repeated layers' costs
/// are copies, so only those name one parameter).
static void forEachRankParam(const std::vector<UnitCost> &Costs,
                             ArrayRef<std::pair<unsigned, unsigned>> Units,
                             function_ref<void(const HeldParam &)> Fn) {
  DenseSet<const Value *> Seen;
  for (auto [Begin, End] : Units)
    for (unsigned U = Begin; U != End; ++U)
      for (const HeldParam &H : Costs[U].Held) {
        bool Shared =
            llvm::any_of(Costs[U].SharedParams, [&](const HeldParam &S) {
              return S.Param == H.Param;
            });
        if (!Shared || Seen.insert(H.Param).second)
          Fn(H);
      }
}

double
Evaluator::paramGatherSeconds(const std::vector<UnitCost> &Costs,
                              ArrayRef<std::pair<unsigned, unsigned>> Units,
                              Precision P, const CommGroup &Group,
                              unsigned DP) const {
  double ElemBytes = getPrecisionBytes(P);
  bool Copies = P == Precision::BF16 || P == Precision::FP16;
  double Cap = Copies ? getDataParallelBucketElements(DP) : 0;
  double Seconds = 0, Open = 0;
  auto Close = [&] {
    if (Open > 0)
      Seconds +=
          collectiveSeconds(Cl, Collective::AllGather, Open * ElemBytes, Group);
    Open = 0;
  };
  // Those left whole are not gathered.
  forEachRankParam(Costs, Units, [&](const HeldParam &H) {
    if (!H.isShardable(DP))
      return;
    if (Open + H.Elements > Cap)
      Close();
    Open += H.Elements;
  });
  Close();
  return Seconds;
}

Evaluator::StepTail
Evaluator::getStepTail(const PlanConfig &C, const std::vector<UnitCost> &Costs,
                       const PipelineCandidate &Pipe) const {
  // Data-parallel synchronization, ZeRO gathers, offload and optimizer per
  // rank; the slowest rank finishes the step.
  CommGroup DpGroup = getRankGroup(C.DP, C.TP, Cl.GpusPerNode);
  double After = 0, WorstSync = 0, WorstOpt = 0, WorstOffload = 0,
         WorstSlowdown = 0;
  double GradSync = 0;
  // The data-parallel collectives by kind, per rank and on the worst.
  double Kinds[NumCollectives] = {}, WorstKinds[NumCollectives] = {};
  unsigned First = 0;
  std::vector<double> RankParams(C.PP, 0), RankGradSync(C.PP, 0);
  std::vector<std::vector<std::pair<unsigned, unsigned>>> RankRanges(C.PP);
  // ZeRO-3 gathers use by use (the parameters one node reads) and
  // reduce-scatters layer by layer; ZeRO-1/2 gather each parameter once,
  // in buckets (passes/InsertGradSync.cpp): one collective per bucket, each
  // paying its latency.
  std::vector<double> RankGathers(C.PP, 0), RankScatterBytes(C.PP, 0),
      RankParamGathers(C.PP, 0);
  // Weights travel in the compute precision (a 16-bit copy is gathered);
  // gradients in the plan's grad-reduce precision: fp32 by default, the
  // gradient of an fp32 master weight (passes/MixedPrecision.cpp), as
  // Megatron-LM under bf16 and Llama 3 (FP32 reduce-scatter, Meta 2024,
  // section 3.3, "Numerical stability") reduce them
  // (ir/PlanKnobs.def); passes/InsertGradSync.cpp casts the buckets.
  double ElemBytes = getPrecisionBytes(C.TrainPrecision);
  double GradElemBytes = getPrecisionBytes(C.GradReduce);
  // Gradient buckets hold at most the plan's grad-bucket elements, each
  // reduced by one collective, cast to grad-reduce's type for it
  // (passes/InsertGradSync.cpp): over hundreds of ranks a ring's latency
  // per bucket counts.
  double GradBucketBytes = double(C.GradBucket) * GradElemBytes;
  auto Reduce = [&](Collective K, double Bytes) {
    return bucketedCollectiveSeconds(Cl, K, Bytes, GradBucketBytes, DpGroup);
  };
  for (unsigned J = 0; J != Pipe.StageUnits.size(); ++J) {
    RankRanges[J % C.PP].push_back({First, First + Pipe.StageUnits[J]});
    for (unsigned U = First; U != First + Pipe.StageUnits[J]; ++U) {
      RankGradSync[J % C.PP] += Costs[U].GradSyncSeconds;
      if (C.Zero == 3 && C.DP > 1 && Costs[U].ParamElements > 0) {
        // Only the sharded parameters are gathered and reduce-scattered.
        SmallVector<HeldParam, 8> Sharded;
        for (const HeldParam &H : Costs[U].Held)
          if (H.isShardable(C.DP))
            Sharded.push_back(H);
        RankGathers[J % C.PP] += useGatherSeconds(Sharded, ElemBytes, DpGroup);
        RankScatterBytes[J % C.PP] +=
            (Costs[U].ParamElements - wholeElements(Costs[U].Held, C.DP)) *
            GradElemBytes;
      }
    }
    First += Pipe.StageUnits[J];
  }
  // What ZeRO leaves whole (dimension 0 not divided by dp): all-reduced
  // once per step, as zero=0 reduces everything.
  std::vector<double> RankWhole(C.PP, 0), RankPadding(C.PP, 0);
  for (unsigned R = 0; R != C.PP; ++R) {
    RankParams[R] = heldParamElements(Costs, RankRanges[R]);
    if (C.Zero >= 1 && C.DP > 1)
      forEachRankParam(Costs, RankRanges[R], [&](const HeldParam &H) {
        if (!H.isShardable(C.DP))
          RankWhole[R] += H.Elements;
        RankPadding[R] += H.paddingElements(C.DP);
      });
    RankWhole[R] = std::min(RankWhole[R], RankParams[R]);
    if (C.Zero >= 1 && C.Zero < 3 && C.DP > 1)
      RankParamGathers[R] = paramGatherSeconds(Costs, RankRanges[R],
                                               C.TrainPrecision, DpGroup, C.DP);
  }
  for (unsigned R = 0; R != C.PP; ++R) {
    double GradBytes = RankParams[R] * GradElemBytes;
    // The rank's compute per micro-batch, forward and backward: what
    // per-micro-batch transfers can hide behind.
    double RankFwd = 0, RankBwd = 0;
    for (unsigned J = R; J < Pipe.Fwd.size(); J += C.PP) {
      RankFwd += Pipe.Fwd[J];
      RankBwd += Pipe.Bwd[J];
    }
    // Exposed: collective time no compute hides; Hidden: the compute time
    // that collectives overlap, which runs slower for it.
    double Exposed = 0, Hidden = 0;
    std::fill(std::begin(Kinds), std::end(Kinds), 0.0);
    if (C.DP > 1 && C.Zero < 3) {
      if (C.Zero == 0) {
        Kinds[unsigned(Collective::AllReduce)] =
            Reduce(Collective::AllReduce, GradBytes);
      } else {
        double WholeBytes = RankWhole[R] * GradElemBytes;
        Kinds[unsigned(Collective::ReduceScatter)] =
            Reduce(Collective::ReduceScatter, GradBytes - WholeBytes);
        Kinds[unsigned(Collective::AllGather)] = RankParamGathers[R];
        Kinds[unsigned(Collective::AllReduce)] =
            Reduce(Collective::AllReduce, WholeBytes);
      }
      double Sync = Kinds[unsigned(Collective::AllReduce)] +
                    Kinds[unsigned(Collective::ReduceScatter)] +
                    Kinds[unsigned(Collective::AllGather)];
      // Buckets reduce while the last micro-batch's backward runs.
      Exposed = C.DpOverlap ? std::max(0.0, Sync - RankBwd) : Sync;
      Hidden = Sync - Exposed;
    }
    // ZeRO-3 (Rajbhandari et al. 2020, section 5.3): each micro-batch
    // gathers the weights before its forward and again before its
    // backward, and reduce-scatters its gradients; prefetching hides them
    // behind compute as far as the compute lasts. Weights offloaded to the
    // host (ZeRO-Infinity) are fetched over PCIe first, and gradients go
    // back down.
    double Offload = 0;
    if (C.Zero == 3) {
      // Each micro-batch's gradients reduce-scattered in buckets.
      double Gather = RankGathers[R],
             Scatter = Reduce(Collective::ReduceScatter, RankScatterBytes[R]);
      Kinds[unsigned(Collective::AllGather)] = C.MicroBatches * 2 * Gather;
      Kinds[unsigned(Collective::ReduceScatter)] = C.MicroBatches * Scatter;
      double Fetch = 0, Down = 0;
      if (C.Offload == OffloadKind::AllCpu ||
          C.Offload == OffloadKind::AllNvme) {
        double Link = C.Offload == OffloadKind::AllNvme
                          ? Cl.nvmeBytesPerSecPerGpu()
                          : Cl.HostLink.BytesPerSec;
        // A rank's shards of the sharded parameters, and the whole ones.
        double Held = (RankParams[R] - RankWhole[R]) / C.DP + RankWhole[R];
        Fetch = Link > 0 ? Held * ElemBytes / Link : 0;
        Down = Link > 0 ? Held * GradElemBytes / Link : 0;
      }
      // The compute each micro-batch's transfers hide behind: none without
      // overlap, where every gather and reduce-scatter waits.
      double FwdCover = C.DpOverlap ? RankFwd : 0,
             BwdCover = C.DpOverlap ? RankBwd : 0;
      double FwdExposed = std::max(0.0, Gather + Fetch - FwdCover);
      double BwdExposed =
          std::max(0.0, Gather + Scatter + Fetch + Down - BwdCover);
      double Comm =
          C.MicroBatches * (std::max(0.0, Gather - FwdCover) +
                            std::max(0.0, Gather + Scatter - BwdCover));
      Exposed += Comm;
      Hidden += C.MicroBatches * (2 * Gather + Scatter) - Comm;
      Offload = C.MicroBatches * (FwdExposed + BwdExposed) - Comm;
      // The whole parameters' gradients, all-reduced once per step.
      double WholeSync =
          Reduce(Collective::AllReduce, RankWhole[R] * GradElemBytes);
      Kinds[unsigned(Collective::AllReduce)] = WholeSync;
      double WholeExposed = std::max(0.0, WholeSync - BwdCover);
      Exposed += WholeExposed;
      Hidden += WholeSync - WholeExposed;
    }
    double Slowdown = OverlappedComputeSlowdown * Hidden;
    ModelStateConfig MS;
    MS.Params = RankParams[R];
    MS.WholeParams = RankWhole[R];
    MS.PaddingParams = RankPadding[R];
    MS.DataParallel = C.DP;
    MS.ZeroStage = C.Zero;
    MS.Optimizer = O.Optimizer;
    MS.Offload = C.Offload;
    setTrainingPrecision(MS, C.TrainPrecision);
    double Opt = optimizerStepSeconds(MS, Cl);
    double Tail = Exposed + Slowdown + Opt + Offload + RankGradSync[R];
    if (Tail > After) {
      After = Tail;
      WorstSync = Exposed;
      WorstSlowdown = Slowdown;
      WorstOpt = Opt;
      WorstOffload = Offload;
      GradSync = RankGradSync[R];
      std::copy(std::begin(Kinds), std::end(Kinds), WorstKinds);
    }
  }

  StepTail T;
  T.Seconds = After;
  T.Sync = WorstSync;
  T.OverlapSlowdown = WorstSlowdown;
  T.Optimizer = WorstOpt;
  T.Offload = WorstOffload;
  T.GradSync = GradSync;
  std::copy(std::begin(WorstKinds), std::end(WorstKinds), T.Kinds);
  return T;
}

Plan Evaluator::predict(const PlanConfig &C, const std::vector<UnitCost> &Costs,
                        PipelineCandidate Pipe,
                        std::vector<RankPrediction> Ranks, double PeakMemory,
                        const StepTail &Tail) const {
  unsigned NumUnits = Costs.size();
  double Capacity = double(Cl.Device.MemoryBytes);
  Plan Out;
  Out.Config = C;
  Out.Config.StageUnits = Pipe.StageUnits;
  PlanPrediction &P = Out.Prediction;
  P.PipelineSeconds = Pipe.Sim.StepSeconds;
  P.BubbleFraction = Pipe.Sim.BubbleFraction;
  P.StepSeconds = P.PipelineSeconds + Tail.Seconds;
  P.DpSyncSeconds = Tail.Sync + Tail.OverlapSlowdown + Tail.GradSync;
  P.DpOverlapSlowdownSeconds = Tail.OverlapSlowdown;
  std::copy(std::begin(Tail.Kinds), std::end(Tail.Kinds),
            P.DpCollectiveSeconds);
  P.TpGradSyncSeconds = Tail.GradSync;
  P.OptimizerSeconds = Tail.Optimizer;
  P.OffloadSeconds = Tail.Offload;
  double ModelFlops = 0, Extra = 0;
  for (unsigned U = 0; U != NumUnits; ++U) {
    ModelFlops += Costs[U].FwdFlops + Costs[U].BwdFlops;
    Recompute Mode =
        recomputes(U, NumUnits) ? C.Recomputation : Recompute::None;
    if (Mode == Recompute::Full)
      Extra += Costs[U].FwdFlops;
    else if (Mode == Recompute::Selective)
      Extra += Costs[U].AttentionCoreFlops;
  }
  double Samples = double(C.MicroBatch) * C.MicroBatches * C.DP;
  double Steps = double(C.MicroBatches) * C.DP;
  double Gpus = double(C.TP) * C.PP * C.DP;
  // Utilization against the peak of the precision the plan computes in.
  double PeakRate = Cl.Device.PeakFlops(C.TrainPrecision);
  P.TokensPerSecond = Samples * Profile.getTokensPerSample() / P.StepSeconds;
  P.ModelTflopsPerGpu = ModelFlops * Steps / Gpus / P.StepSeconds / 1e12;
  P.HardwareTflopsPerGpu =
      (ModelFlops + Extra) * Steps / Gpus / P.StepSeconds / 1e12;
  P.Mfu = PeakRate > 0 ? P.ModelTflopsPerGpu * 1e12 / PeakRate : 0;
  P.Hfu = PeakRate > 0 ? P.HardwareTflopsPerGpu * 1e12 / PeakRate : 0;
  P.PeakMemoryBytes = PeakMemory;
  P.MemoryCapacityBytes = Capacity;
  for (unsigned R = 0; R != C.PP; ++R) {
    Ranks[R].BusySeconds = Pipe.Sim.BusySeconds[R];
    double Opaque = 0;
    for (auto [Begin, End] : rangesOf(C, Pipe.StageUnits, R))
      for (unsigned U = Begin; U != End; ++U)
        Opaque += Costs[U].OpaqueSeconds;
    P.OpaqueFraction =
        std::max(P.OpaqueFraction, Opaque * C.MicroBatches / P.StepSeconds);
  }
  P.Ranks = std::move(Ranks);
  P.StageForward = Pipe.Fwd;
  P.StageBackward = Pipe.Bwd;
  P.P2PSeconds = Pipe.P2PSeconds;
  P.StageSendSeconds = Pipe.Send;
  return Out;
}

/// Strict order of plans: faster first, then the configuration tuple.
bool betterPlan(const Plan &A, const Plan &B) {
  if (A.Prediction.StepSeconds != B.Prediction.StepSeconds)
    return A.Prediction.StepSeconds < B.Prediction.StepSeconds;
  return A.Config.str() < B.Config.str();
}

std::vector<unsigned> divisorsOf(unsigned N) {
  std::vector<unsigned> D;
  for (unsigned I = 1; I <= N; ++I)
    if (N % I == 0)
      D.push_back(I);
  return D;
}

} // namespace

Expected<Plan> autopar::evaluatePlan(ModelProfile &Profile, const Cluster &Cl,
                                     const SearchOptions &Options,
                                     const PlanConfig &Config) {
  Evaluator E(Profile, Cl, Options);
  Expected<std::optional<Plan>> P =
      E.evaluate(Config, std::numeric_limits<double>::infinity());
  if (!P)
    return P.takeError();
  if (!*P && std::isinf(E.LeastMemory) && !std::isinf(E.LeastHostMemory))
    return error(
        "the plan " + Config.str() + " does not fit: it offloads " +
        formatv("{0:f1}", E.LeastHostMemory / double(1ull << 30)) +
        " GiB per GPU to host memory, more than each GPU's share "
        "of its node's (" +
        formatv("{0:f1}", hostMemoryBytesPerGpu(Cl) / double(1ull << 30)) +
        " GiB)");
  if (!*P)
    return error("the plan " + Config.str() + " does not fit: it needs " +
                 formatv("{0:f1}", E.LeastMemory / double(1ull << 30)) +
                 " GiB per GPU of " +
                 formatv("{0:f1}", Cl.Device.MemoryBytes / double(1ull << 30)) +
                 " GiB");
  return std::move(**P);
}

/// The units the search cuts between: the model's, without the repeated
/// blocks beyond --keep-blocks.
static unsigned getNumUnits(const ModelProfile &Profile,
                            const SearchOptions &O) {
  unsigned NumUnits = Profile.getUnits().size();
  if (O.KeepBlocks) {
    size_t Repeated = Profile.getRepeatedUnits().size();
    NumUnits -= Repeated - std::min<size_t>(Repeated, *O.KeepBlocks);
  }
  return NumUnits;
}

/// An error when a pinned choice (--fix) cannot hold on this cluster and a
/// model of NumUnits units, saying which values could.
static Error checkPins(const ModelProfile &Profile, const Cluster &Cl,
                       const SearchOptions &O, unsigned MaxTP,
                       unsigned NumUnits) {
  const PlanFixes &F = O.Fixed;
  unsigned N = Cl.NumGpus;
  int64_t Heads = Profile.getAttentionHeads();
  if (F.TP) {
    std::string Valid;
    for (unsigned TP : divisorsOf(N))
      if (TP <= MaxTP && !(Heads && Heads % TP))
        Valid += (Valid.empty() ? "" : ", ") + std::to_string(TP);
    if (Heads && Heads % *F.TP)
      return error("--fix tp=" + Twine(*F.TP) + " does not divide the " +
                   Twine(Heads) +
                   " attention heads; valid tensor-parallel "
                   "degrees here: " +
                   Valid);
    if (*F.TP > MaxTP || N % *F.TP)
      return error("--fix tp=" + Twine(*F.TP) + " does not fit " + Twine(N) +
                   " GPUs with " + Twine(Cl.GpusPerNode) +
                   " per node (--tp-across-nodes allows more than a node); "
                   "valid tensor-parallel degrees here: " +
                   Valid);
  }
  // A pinned choice the backend cannot run (the attention kernel is pinned
  // or the device's default).
  PlanConfig Pinned;
  Pinned.Attention = O.Attention;
  if (F.Recomputation)
    Pinned.Recomputation = *F.Recomputation;
  if (F.Offload)
    Pinned.Offload = *F.Offload;
  // Overlap matters once there are replicas: pinned, or free to be.
  Pinned.DpOverlap = O.DpOverlap;
  Pinned.DP = F.DP ? *F.DP : 2;
  // Checked sends matter once there are stages: pinned, or free to be.
  Pinned.VerifyTransfers = O.VerifyTransfers;
  Pinned.PP = F.PP ? *F.PP : 2;
  if (Error E = checkCapabilities(Cl, Pinned, "--fix",
                                  O.WarnUnpricedPins && O.ShardIndex == 0))
    return E;
  if (F.MicroBatch && Profile.getFixedBatch() &&
      *F.MicroBatch != *Profile.getFixedBatch())
    return error("--fix mbs=" + Twine(*F.MicroBatch) +
                 ": the model fixes the batch size to " +
                 Twine(*Profile.getFixedBatch()) +
                 " (its batch dimension is static); pin mbs=" +
                 Twine(*Profile.getFixedBatch()) + " or leave it free");
  if (F.PP && *F.PP * F.VPP.value_or(1) > NumUnits)
    return error("--fix pp=" + Twine(*F.PP) +
                 (F.VPP ? ",vpp=" + Twine(*F.VPP) : Twine()) + " needs " +
                 Twine(*F.PP * F.VPP.value_or(1)) +
                 " layer units to cut between; the model has " +
                 Twine(NumUnits) +
                 (NumUnits == 1 ? " (no repeated blocks were found)" : "") +
                 "; pin pp to at most " + Twine(NumUnits));
  return Error::success();
}

Expected<SearchResult> autopar::searchPlans(ModelProfile &Profile,
                                            const Cluster &Cl,
                                            const SearchOptions &O) {
  const PlanFixes &F = O.Fixed;
  unsigned N = Cl.NumGpus;
  if (O.GlobalBatch < 1)
    return error("--global-batch must be at least 1");
  SearchResult Result;
  Evaluator E(Profile, Cl, O);
  std::vector<Plan> Best;
  unsigned K = std::max(1u, O.TopK);
  auto Bound = [&]() {
    return Best.size() < K ? std::numeric_limits<double>::infinity()
                           : Best.back().Prediction.StepSeconds;
  };
  unsigned MaxTP = O.TpAcrossNodes ? N : std::min(N, Cl.GpusPerNode);
  int64_t Heads = Profile.getAttentionHeads();
  uint64_t Tried = 0;
  unsigned PairIndex = 0;
  unsigned NumUnits = getNumUnits(Profile, O);
  if (Error Pinned = checkPins(Profile, Cl, O, MaxTP, NumUnits))
    return Pinned;
  RuntimeBackend Backend = getPlanBackend(Cl.Device.Name);
  // The ZeRO stage a pinned offload needs on one replica: ZeRO over one
  // rank shards nothing, and the offload then moves the whole state.
  unsigned PinnedOffloadZero = !F.Offload || *F.Offload == OffloadKind::None ? 0
                               : offloadsParameters(*F.Offload)              ? 3
                                                                : 1;
  for (unsigned TP : divisorsOf(N)) {
    if (TP > MaxTP || (F.TP && TP != *F.TP) || (Heads && Heads % TP))
      continue;
    for (bool SP : {false, true}) {
      if ((SP && TP == 1) || (F.SequenceParallel && SP != *F.SequenceParallel))
        continue;
      unsigned Pair = PairIndex++;
      for (unsigned PP : divisorsOf(N / TP)) {
        if ((F.PP && PP != *F.PP) || PP > NumUnits)
          continue;
        unsigned DP = N / TP / PP;
        if ((F.DP && DP != *F.DP) || O.GlobalBatch % DP)
          continue;
        // Micro-batch sizes: the pinned one or the model's fixed batch
        // (any size), else powers of two.
        SmallVector<int64_t, 16> Sizes;
        if (F.MicroBatch || Profile.getFixedBatch())
          Sizes.push_back(F.MicroBatch ? *F.MicroBatch
                                       : *Profile.getFixedBatch());
        else
          for (int64_t MBS = 1; MBS <= O.GlobalBatch / DP; MBS *= 2)
            Sizes.push_back(MBS);
        for (int64_t MBS : Sizes) {
          if (MBS > O.GlobalBatch / DP || (O.GlobalBatch / DP) % MBS)
            continue;
          // Each (tp, sp, micro-batch size) triple needs its own sharding
          // solve: threads take triples in turn.
          unsigned Triple = Pair * 64 + llvm::Log2_64(uint64_t(MBS));
          if (Triple % std::max(1u, O.ShardCount) != O.ShardIndex)
            continue;
          int64_t M = O.GlobalBatch / DP / MBS;
          for (ScheduleKind S :
               {ScheduleKind::OneFOneB, ScheduleKind::Interleaved,
                ScheduleKind::GPipe}) {
            if (F.Schedule ? S != *F.Schedule : S == ScheduleKind::GPipe)
              continue;
            if (S == ScheduleKind::Interleaved && (PP == 1 || M % PP))
              continue;
            for (unsigned VPP : {1u, 2u, 3u, 4u, 6u, 8u}) {
              if ((S == ScheduleKind::Interleaved) != (VPP > 1) ||
                  (F.VPP && VPP != *F.VPP) || PP * VPP > NumUnits)
                continue;
              for (Recompute R :
                   {Recompute::None, Recompute::Selective, Recompute::Full}) {
                if (F.Recomputation && R != *F.Recomputation)
                  continue;
                for (unsigned Z = 0; Z != 4; ++Z) {
                  // One replica needs no ZeRO, except as the stage a pinned
                  // offload needs (PinnedOffloadZero).
                  if ((F.Zero && Z != *F.Zero) ||
                      (!F.Zero && DP == 1 && Z && Z != PinnedOffloadZero))
                    continue;
                  for (OffloadKind Off :
                       {OffloadKind::None, OffloadKind::OptimizerCpu,
                        OffloadKind::AllCpu, OffloadKind::OptimizerNvme,
                        OffloadKind::AllNvme}) {
                    if (F.Offload ? Off != *F.Offload
                                  : Off == OffloadKind::OptimizerNvme ||
                                        Off == OffloadKind::AllNvme)
                      continue;
                    if (offloadsParameters(Off) && Z != 3)
                      continue;
                    // Offloading the optimizer needs ZeRO >= 1 (DeepSpeed's
                    // offload_optimizer, which the launch files use). On
                    // the `cpu` device the host is the device memory, so
                    // only a pinned offload is planned there (the runtime
                    // executes it: docs/Offload.md; the nvme link's figures
                    // are the disk's measured ones, cost/Devices.def).
                    if (Off != OffloadKind::None &&
                        (Z == 0 || (Cl.Device.Name == "cpu" && !F.Offload)))
                      continue;
                    PlanConfig C;
                    C.TP = TP;
                    C.PP = PP;
                    C.DP = DP;
                    C.VPP = VPP;
                    C.MicroBatch = MBS;
                    C.MicroBatches = M;
                    C.Schedule = S;
                    C.Zero = Z;
                    C.Recomputation = R;
                    C.SequenceParallel = SP;
                    C.Offload = Off;
                    C.TrainPrecision = O.TrainPrecision;
                    C.Attention = O.Attention;
                    C.DpOverlap = O.DpOverlap;
                    C.GradReduce = O.GradReduce;
                    C.Fusion = O.Fusion;
                    C.VerifyTransfers = O.VerifyTransfers;
                    // Chosen by evaluate (0) unless pinned.
                    C.GradBucket = O.GradBucket.value_or(0);
                    // Only what the plan's backend runs as priced, but
                    // for the attention kernel, which is not searched
                    // (pinned, or the device's priced default).
                    if (!isSearchable(Backend, C))
                      continue;
                    Expected<std::optional<Plan>> P = E.evaluate(C, Bound());
                    if (O.Progress && (++Tried & 255) == 0)
                      O.Progress(E.Evaluated);
                    if (!P)
                      return P.takeError();
                    if (!*P)
                      continue;
                    Best.push_back(std::move(**P));
                    llvm::sort(Best, betterPlan);
                    if (Best.size() > K)
                      Best.pop_back();
                  }
                }
              }
            }
          }
        }
      }
    }
  }
  Result.Plans = std::move(Best);
  Result.ConfigsEvaluated = E.Evaluated;
  Result.LeastMemoryNeeded = std::isinf(E.LeastMemory) ? 0 : E.LeastMemory;
  Result.LeastHostMemoryNeeded =
      std::isinf(E.LeastHostMemory) ? 0 : E.LeastHostMemory;
  return Result;
}

std::string autopar::explainEmptySearchSpace(const ModelProfile &Profile,
                                             const Cluster &Cl,
                                             const SearchOptions &O) {
  const PlanFixes &F = O.Fixed;
  unsigned N = unsigned(Cl.NumGpus);
  std::optional<int64_t> Fixed = Profile.getFixedBatch();
  // The data-parallel degrees the pins and the GPU count allow.
  std::vector<unsigned> Degrees;
  for (unsigned TP : divisorsOf(N))
    for (unsigned PP : divisorsOf(N / TP))
      if ((!F.TP || TP == *F.TP) && (!F.PP || PP == *F.PP) &&
          (!F.DP || N / TP / PP == *F.DP) &&
          !is_contained(Degrees, N / TP / PP))
        Degrees.push_back(N / TP / PP);
  llvm::sort(Degrees);
  if (Degrees.empty())
    return (Twine("the pins (--fix ") + F.str() + ") need tp x pp x dp = " +
            Twine(N) + " GPUs, which they do not multiply to")
        .str();
  int64_t G = O.GlobalBatch;
  std::optional<int64_t> MBS = F.MicroBatch ? F.MicroBatch : Fixed;
  for (unsigned DP : Degrees) {
    if (G % DP)
      continue;
    if (!MBS || ((G / DP) % *MBS == 0 && *MBS <= G / DP))
      return "";
  }
  unsigned DP = Degrees.front();
  std::string Why;
  if (MBS) {
    std::string Source =
        F.MicroBatch ? "--fix mbs=" + std::to_string(*MBS)
                     : "the model's batch dimension (bound to " +
                           std::to_string(*MBS) + ", by --dim or the model)";
    Why = Source + " fixes the micro-batch size to " + std::to_string(*MBS) +
          ", and each of the " + std::to_string(DP) +
          " data-parallel replicas gets --global-batch " + std::to_string(G) +
          " / dp " + std::to_string(DP) +
          " samples per step, which is not a "
          "multiple of it: pass a --global-batch that is a multiple of " +
          std::to_string(*MBS * DP) +
          (Fixed && !F.MicroBatch ? ", or leave the batch dimension unbound"
                                  : "");
  } else {
    Why = "--global-batch " + std::to_string(G) +
          " is not divisible by the data-parallel degree " +
          std::to_string(DP) + ": pass a multiple of " + std::to_string(DP);
  }
  return Why;
}

SearchResult autopar::mergeSearchResults(std::vector<SearchResult> Parts,
                                         unsigned TopK) {
  SearchResult Out;
  double Least = 0, LeastHost = 0;
  for (SearchResult &P : Parts) {
    for (Plan &Pl : P.Plans)
      Out.Plans.push_back(std::move(Pl));
    Out.ConfigsEvaluated += P.ConfigsEvaluated;
    if (P.LeastMemoryNeeded > 0 && (Least == 0 || P.LeastMemoryNeeded < Least))
      Least = P.LeastMemoryNeeded;
    if (P.LeastHostMemoryNeeded > 0 &&
        (LeastHost == 0 || P.LeastHostMemoryNeeded < LeastHost))
      LeastHost = P.LeastHostMemoryNeeded;
  }
  llvm::sort(Out.Plans, betterPlan);
  if (Out.Plans.size() > std::max(1u, TopK))
    Out.Plans.resize(std::max(1u, TopK));
  Out.LeastMemoryNeeded = Least;
  Out.LeastHostMemoryNeeded = LeastHost;
  return Out;
}

double autopar::roundToSignificant(double V, int Digits) {
  if (V == 0 || !std::isfinite(V) || V == std::trunc(V))
    return V;
  char Buf[64];
  snprintf(Buf, sizeof(Buf), "%.*g", Digits, V);
  return std::strtod(Buf, nullptr);
}

PlanPredicted autopar::getRecordedPrediction(const PlanPrediction &R) {
  PlanPredicted P{R.StepSeconds,
                  R.TokensPerSecond,
                  R.ModelTflopsPerGpu,
                  R.HardwareTflopsPerGpu,
                  R.Mfu,
                  R.Hfu,
                  R.BubbleFraction,
                  R.PeakMemoryBytes,
                  R.MemoryCapacityBytes,
                  R.OpaqueFraction};
  for (double *F :
       {&P.StepSeconds, &P.TokensPerSecond, &P.ModelTflopsPerGpu,
        &P.HardwareTflopsPerGpu, &P.Mfu, &P.Hfu, &P.BubbleFraction,
        &P.PeakMemoryBytes, &P.MemoryCapacityBytes, &P.OpaqueFraction})
    *F = roundToSignificant(*F, 6);
  return P;
}

std::vector<StageMemory> autopar::getRecordedMemory(const PlanPrediction &P) {
  std::vector<StageMemory> Stages;
  auto Bytes = [](double B) { return int64_t(std::llround(B)); };
  for (const RankPrediction &R : P.Ranks)
    Stages.push_back({Bytes(R.WeightBytes), Bytes(R.GradBytes),
                      Bytes(R.OptimizerBytes), Bytes(R.ActivationBytes),
                      Bytes(R.OverheadBytes), Bytes(R.OffloadedBytes),
                      Bytes(R.MemoryBytes)});
  return Stages;
}
