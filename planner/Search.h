//===- Search.h - One search over every parallelization choice --*- C++ -*-===//
//
// Enumerates tensor parallelism (dividing the heads, inside a node unless
// allowed across), sequence parallelism, micro-batch size, pipeline depth,
// virtual stages and schedule, recomputation, ZeRO stage and offload, under
// global batch = micro-batch x micro-batches x data parallelism. For each
// candidate it cuts the units into stages (balancing time under each rank's
// memory), simulates the schedule (planner/Schedule.h), and adds the
// data-parallel gradient synchronization and the optimizer step. A lower
// bound (the busiest rank's compute with no bubble) prunes candidates that
// cannot beat the K-th best, so the search is exact over its space; ties are
// broken by the configuration tuple, so the result is deterministic.
//
//===----------------------------------------------------------------------===//

#ifndef AUTOPAR_PLANNER_SEARCH_H
#define AUTOPAR_PLANNER_SEARCH_H

#include "cost/ActivationMemory.h"
#include "cost/ModelState.h"
#include "planner/ModelProfile.h"
#include "planner/Schedule.h"

#include "llvm/Support/Error.h"
#include "llvm/Support/JSON.h"

#include <functional>
#include <optional>
#include <string>
#include <vector>

namespace autopar {

struct SearchOptions {
  /// Samples per step (required).
  int64_t GlobalBatch = 0;
  PlanFixes Fixed;
  /// Allow tensor-parallel groups larger than a node.
  bool TpAcrossNodes = false;
  /// How many of the best plans to keep.
  unsigned TopK = 1;
  OptimizerKind Optimizer = OptimizerKind::AdamW;
  /// What training computes in (not searched: Fixed.TrainPrecision, else
  /// the device's default, defaultTrainingPrecision). Every candidate's
  /// PlanConfig carries it.
  Precision TrainPrecision = Precision::BF16;
  /// How attention runs (not searched either: Fixed.Attention, else
  /// defaultAttentionKernel). The profile's cost settings must agree.
  AttentionKernel Attention = AttentionKernel::Materialized;
  /// Whether data-parallel communication overlaps compute (not searched
  /// either, overlapping never loses: Fixed.DpOverlap, else on).
  bool DpOverlap = true;
  /// What data-parallel gradient reductions move (not searched either:
  /// Fixed.GradReduce, else fp32).
  Precision GradReduce = Precision::FP32;
  /// The gradient bucket (elements), pinned; otherwise each candidate
  /// takes Megatron-Core's max(4e7, 1e6 x dp) where it fits, else 25 MiB
  /// of fp32 gradients (ir/PlanKnobs.def).
  std::optional<int64_t> GradBucket;
  /// Whether the imported graph's norms, activations and rotary embeddings
  /// were fused (not searched: the import decides it, and every candidate's
  /// PlanConfig carries it).
  bool Fusion = true;
  /// CRC32C checks of point-to-point messages (not searched:
  /// Fixed.VerifyTransfers, else off).
  bool VerifyTransfers = false;
  /// Overlap sends between pipeline stages with compute (Megatron-LM
  /// --overlap-p2p-communication); otherwise they block both ranks.
  bool OverlapP2P = false;
  /// Called now and then with the candidates evaluated so far (a progress
  /// line for a terminal); never changes the result.
  std::function<void(uint64_t)> Progress;
  /// Search only the (tp, sp, micro-batch size) triples whose index modulo
  /// ShardCount is ShardIndex: threads split the space this way and
  /// mergeSearchResults joins their results into what one search would
  /// give.
  unsigned ShardIndex = 0, ShardCount = 1;
  /// Warn about a pinned choice the backend runs slower than priced: the
  /// first shard of the search the user asked for does; the other shards
  /// and the searches for what would fit (driver/PlanDriver.cpp) do not.
  bool WarnUnpricedPins = true;
  /// Plan a smaller model of the same shape: only the first KeepBlocks of
  /// the model's repeated units (ModelProfile::getRepeatedUnits), the other
  /// units as they are. What "the largest model that fits" searches over.
  std::optional<unsigned> KeepBlocks;
};

// PlanConfig and PlanFixes are the plan's (ir/Plan.h).

struct RankPrediction {
  double BusySeconds = 0;
  double MemoryBytes = 0;
  double ModelStateBytes = 0, ActivationBytes = 0;
  /// ModelStateBytes by part, and the framework allowance. WeightBytes
  /// includes the frozen parameters, at their own bytes
  /// (cost/HeldParams.h).
  double WeightBytes = 0, GradBytes = 0, OptimizerBytes = 0, OverheadBytes = 0;
  /// Model state offloaded to host memory or NVMe (not in MemoryBytes);
  /// HostBytes of it in host memory.
  double OffloadedBytes = 0, HostBytes = 0;
};

struct PlanPrediction {
  double StepSeconds = 0;
  double PipelineSeconds = 0, BubbleFraction = 0;
  double DpSyncSeconds = 0, OptimizerSeconds = 0, OffloadSeconds = 0;
  double TokensPerSecond = 0;
  double ModelTflopsPerGpu = 0, HardwareTflopsPerGpu = 0;
  double Mfu = 0, Hfu = 0;
  double PeakMemoryBytes = 0, MemoryCapacityBytes = 0;
  /// Of the step, the most that one pipeline rank spends in ops autopar
  /// does not know (Opaque), priced by estimates of their FLOPs and bytes
  /// (ir/OpaqueFlops.cpp): how far the prediction rests on a guess.
  double OpaqueFraction = 0;
  std::vector<RankPrediction> Ranks; // per pipeline rank
  /// One micro-batch's forward and backward seconds per virtual stage, and
  /// a send between stages: what the schedule was simulated with.
  std::vector<double> StageForward, StageBackward;
  double P2PSeconds = 0;
  /// Per virtual stage, one send of its output to the next stage (and of
  /// its input's gradient back, which costs the same); 0 without a
  /// pipeline. Unless sends overlap compute, a chunk's forward ends with the
  /// first (but on the last stage) and its backward with the second (but on
  /// the first stage); StageForward and StageBackward include them.
  std::vector<double> StageSendSeconds;
  /// DpSyncSeconds by part, on the rank that finishes last: its
  /// data-parallel collectives per step by kind (indexed by Collective)
  /// before overlap hides part of them (the gradient all-reduce; ZeRO's
  /// reduce-scatter and all-gather), and the tensor-parallel all-reduce of
  /// the gradients of parameters held replicated.
  double DpCollectiveSeconds[NumCollectives] = {};
  double TpGradSyncSeconds = 0;
  /// Of DpSyncSeconds, what the compute that hides data-parallel
  /// collectives loses to them (cost/Collectives.h,
  /// OverlappedComputeSlowdown).
  double DpOverlapSlowdownSeconds = 0;
};

struct Plan {
  PlanConfig Config;
  PlanPrediction Prediction;
};

struct SearchResult {
  /// The best plans, best first.
  std::vector<Plan> Plans;
  uint64_t ConfigsEvaluated = 0;
  /// When no plan fits: the least memory any candidate needed per GPU.
  double LeastMemoryNeeded = 0;
  /// When no plan fits and the candidates that fit the device offloaded
  /// more than the host holds: the least host memory one needed per GPU.
  double LeastHostMemoryNeeded = 0;
};

/// Fixed memory every rank keeps outside the model: CUDA context, NCCL
/// buffers and allocator slack. An allowance, not a measurement
/// (docs/Planner.md, "Memory").
double frameworkOverheadBytes(const Cluster &Cl);

/// What a plan on Device trains in unless --fix precision= says: bf16 mixed
/// precision where the device computes bf16 faster than fp32 (GPUs with
/// tensor cores; what Megatron-LM and DeepSpeed runs use on A100 and H100),
/// else fp32 (the `cpu` device: the CPU runtime computes in fp32).
Precision defaultTrainingPrecision(const DeviceSpec &Device);
/// An error unless the backend that runs the device's plans executes every
/// choice of C (ir/BackendCapabilities.def): what a plan that is written
/// must pass. Given names what chose it (`--fix`, `the given plan's`).
/// What-if pricing (autopar explain) does not need it. With WarnUnpriced, a
/// choice the backend runs slower than priced is warned about.
llvm::Error checkCapabilities(const Cluster &Cl, const PlanConfig &C,
                              llvm::StringRef Given, bool WarnUnpriced = true);
/// Flash attention where it exists: GPUs training in bf16 or fp16
/// (FlashAttention's kernels take 16-bit inputs only) whose backend runs a
/// flash kernel at its price (ir/BackendCapabilities.def); materialized
/// scores otherwise (fp32, the CPU runtime, CUDA until its flash kernels
/// use tensor cores).
AttentionKernel defaultAttentionKernel(const DeviceSpec &Device,
                                       Precision Train);

llvm::Expected<SearchResult> searchPlans(ModelProfile &Profile,
                                         const Cluster &Cl,
                                         const SearchOptions &Options);

/// Why no candidate of the search space exists when the batch arithmetic
/// rules them all out (global batch = micro-batch size x micro-batches x
/// dp, with the pins, the GPU count and the model's fixed batch), naming
/// what conflicts and what would resolve it; "" when some candidate
/// exists (the search then found none that fits in memory).
std::string explainEmptySearchSpace(const ModelProfile &Profile,
                                    const Cluster &Cl,
                                    const SearchOptions &Options);

/// The best TopK plans of several searches over disjoint parts of one
/// space, in the order one search would give them.
SearchResult mergeSearchResults(std::vector<SearchResult> Parts, unsigned TopK);

/// Predictions of one given configuration (its StageUnits may be empty: the
/// cut is then chosen).
llvm::Expected<Plan> evaluatePlan(ModelProfile &Profile, const Cluster &Cl,
                                  const SearchOptions &Options,
                                  const PlanConfig &Config);

/// V rounded to Digits significant digits, so that plan files do not carry
/// the last bits of a floating-point computation; whole numbers (byte
/// counts) stay as they are.
double roundToSignificant(double V, int Digits);

/// The predictions plan files record (rounded to 6 significant digits, so
/// that they do not carry the last bits of a floating-point computation).
PlanPredicted getRecordedPrediction(const PlanPrediction &P);
/// Per pipeline rank, the predicted bytes by part (rounded to bytes).
std::vector<StageMemory> getRecordedMemory(const PlanPrediction &P);

} // namespace autopar

#endif // AUTOPAR_PLANNER_SEARCH_H
