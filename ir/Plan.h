//===- Plan.h - A parallelization plan as IR module attributes --*- C++ -*-===//
//
// A plan is IR: its configuration, the model and cluster it was made for,
// the inputs that re-derive it and its predictions are attributes of the
// module (`module {...}` at the top of plan.air, docs/IR.md). PlanRecord is
// their typed form. encodePlan and decodePlan convert between the two, and
// every reader of a plan goes through decodePlan: the verifier, the
// planner's `--plan`, `autopar check` and `explain`, the launch-file
// emitters and the runtime (whose per-stage programs carry the plan's
// attributes). plan.json is the same attributes as JSON: planToJSON writes
// it and parsePlanJSON reads it back, through decodePlan.
//
// The knobs (PlanConfig's fields) come from one table, ir/PlanKnobs.def.
//
//===----------------------------------------------------------------------===//

#ifndef AUTOPAR_IR_PLAN_H
#define AUTOPAR_IR_PLAN_H

#include "ir/Attributes.h"

#include "llvm/ADT/StringRef.h"
#include "llvm/Support/Error.h"
#include "llvm/Support/JSON.h"

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

namespace autopar {

class Module;

//===----------------------------------------------------------------------===//
// The kinds of values a plan's knobs take
//===----------------------------------------------------------------------===//

enum class ScheduleKind {
  /// All forwards, then all backwards (Huang et al. 2019).
  GPipe,
  /// PipeDream-Flush (Narayanan et al. 2021, Megatron-LM): rank r runs
  /// min(p - r - 1, m) warm-up forwards, then one forward and one backward
  /// in turn, then the remaining backwards.
  OneFOneB,
  /// Megatron-LM's interleaved 1F1B: v model chunks per rank, micro-batches
  /// taken in groups of p per chunk.
  Interleaved
};
/// "gpipe", "1f1b", "interleaved".
llvm::StringRef getScheduleName(ScheduleKind K);
/// The inverse of getScheduleName; std::nullopt for any other name.
std::optional<ScheduleKind> parseScheduleName(llvm::StringRef Name);

/// Activation recomputation (Korthikanti et al. 2022, section 5): none;
/// selective recomputes the attention core (what scales with seq^2); full
/// keeps only each layer's inputs and recomputes the layer in backward.
enum class Recompute { None, Selective, Full };
llvm::StringRef getRecomputeName(Recompute R);
std::optional<Recompute> parseRecompute(llvm::StringRef Name);

/// Where the optimizer states, and with ZeRO-3 the weights, live.
enum class OffloadKind { None, OptimizerCpu, OptimizerNvme, AllCpu, AllNvme };
llvm::StringRef getOffloadName(OffloadKind K);
std::optional<OffloadKind> parseOffloadName(llvm::StringRef Name);
/// "cpu" or "nvme" for an offload, "" for none.
llvm::StringRef getOffloadDevice(OffloadKind K);
/// True when parameters are offloaded too (Cpu, NVMe), which needs ZeRO-3.
bool offloadsParameters(OffloadKind K);

/// Compute precision of a GEMM: what its tensor-core (or vector) units
/// multiply in. TF32 reads and writes fp32 data; a plan trains in bf16,
/// fp16 or fp32.
enum class Precision { FP32, TF32, BF16, FP16 };
constexpr unsigned NumPrecisions = 4;
/// "fp32", "tf32", "bf16", "fp16": the spelling of plan files and JSON.
llvm::StringRef getPrecisionName(Precision P);
std::optional<Precision> parsePrecision(llvm::StringRef Name);

/// How the Attention op runs.
enum class AttentionKernel : uint8_t {
  /// Scores and probabilities written to memory: a batched product, a fused
  /// scale-mask-softmax kernel, a second product (Megatron-LM's
  /// FusedScaleMaskSoftmax path; PyTorch's math attention).
  Materialized,
  /// One fused kernel (FlashAttention, Dao et al. 2022; Dao 2023) that never
  /// writes the [batch, heads, q, k] scores and recomputes them in its
  /// backward, skipping the blocks a causal mask removes.
  Flash,
};
llvm::StringRef getAttentionKernelName(AttentionKernel K);
std::optional<AttentionKernel> parseAttentionKernel(llvm::StringRef Name);

//===----------------------------------------------------------------------===//
// Configuration
//===----------------------------------------------------------------------===//

/// Every choice of a plan: what the search returns, `--plan` and `explain`
/// read, the passes lower and the launch files are written from.
struct PlanConfig {
#define PLAN_KNOB(FixKey, AttrKey, Type, Field, Default, Min, Max, IsOptional) \
  Type Field = Default;
#include "ir/PlanKnobs.def"
  /// Micro-batches per step (per data-parallel rank); follows from the
  /// global batch, so it is not pinned.
  int64_t MicroBatches = 1;
  /// Units per virtual stage, in model order (PP * VPP entries; embedding
  /// and head units included).
  std::vector<unsigned> StageUnits;

  /// `tp=8,pp=64,...`: the --fix spelling of every knob.
  std::string str() const;
  int64_t getGlobalBatch() const { return MicroBatch * MicroBatches * DP; }
  int64_t getNumGpus() const { return int64_t(TP) * PP * DP; }
};

/// `--fix tp=8,pp=64,...`: the knobs pinned; the rest is searched.
struct PlanFixes {
#define PLAN_KNOB(FixKey, AttrKey, Type, Field, Default, Min, Max, IsOptional) \
  std::optional<Type> Field;
#include "ir/PlanKnobs.def"

  /// Parses `key=value` pairs separated by commas; errors name the key and
  /// list the valid values.
  static llvm::Expected<PlanFixes> parse(llvm::StringRef Text);
  /// The pinned knobs, `key=value,...` in the table's order.
  std::string str() const;
  /// Sets the knobs pinned here in C.
  void applyTo(PlanConfig &C) const;
};

/// The pin keys, comma-separated (for help texts and messages).
std::string getPlanKnobKeys();

//===----------------------------------------------------------------------===//
// The plan record
//===----------------------------------------------------------------------===//

/// What the search predicts of a plan, as plan files record it.
struct PlanPredicted {
  double StepSeconds = 0, TokensPerSecond = 0;
  double ModelTflopsPerGpu = 0, HardwareTflopsPerGpu = 0;
  double Mfu = 0, Hfu = 0, BubbleFraction = 0;
  double PeakMemoryBytes = 0, MemoryCapacityBytes = 0;
  /// What of the step ops autopar does not know take (recorded only when
  /// the model has some).
  double OpaqueFraction = 0;
};

/// Predicted bytes of one pipeline rank, by part: what `autopar-run
/// --memory-report` prints next to what it measures.
struct StageMemory {
  int64_t Weights = 0, Gradients = 0, Optimizer = 0, Activations = 0;
  int64_t Allowance = 0, Offloaded = 0, Total = 0;
};

/// The inputs that, with the model, determine the plan: what `autopar
/// check` re-plans with.
struct PlanInputs {
  int64_t GlobalBatch = 0;
  std::string Fix;
  std::vector<std::string> Dims;
  std::string BatchDim;
  bool TpAcrossNodes = false;
  /// `--top K`: the report shows K plans.
  unsigned Top = 1;
  /// `--freeze` patterns (recorded only when there are some).
  std::vector<std::string> Freeze;
};

/// What launch files need to know of the model: transformer blocks (the
/// units between the embedding and the head), their width, heads,
/// sequence, and the blocks in each virtual stage.
struct ModelShape {
  int64_t Layers = 0, Hidden = 0, Heads = 0, SeqLength = 0, Vocab = 0;
  /// Blocks per virtual stage in model order (pp * vpp entries; embedding
  /// and head not counted).
  std::vector<int64_t> LayersPerStage;
};

struct PlanRecord {
  /// Where the record was read from, for messages (not recorded).
  std::string FileName;
  std::string AutoparVersion, Model, ModelSha256;
  /// Samples per training step.
  int64_t GlobalBatch = 0;
  /// Absent in plans written by hand.
  std::optional<PlanInputs> Inputs;
  /// The cluster as cost/Cluster.h describes it (a dict; clusterToJSON's
  /// document), and the part every reader needs.
  Attribute Cluster;
  std::string ClusterName;
  int64_t NumGpus = 0, GpusPerNode = 0;
  ModelShape Shape;
  PlanConfig Config;
  PlanPredicted Predicted;
  /// Per pipeline rank; empty in plans written by hand.
  std::vector<StageMemory> Memory;
  /// The pass pipeline that lowers each pipeline stage's training program
  /// (`autopar-opt plan.air --passes=...` gives stage<S>.air); empty when
  /// the plan is not lowered.
  std::vector<std::string> TrainingPipelines;
};

/// The module attributes that record R.
AttrDict encodePlan(const PlanRecord &R);
/// The record of module attributes Attrs. Errors name the dotted key
/// ("'plan.tp' is missing", "'plan.schedule' is 'x', expected ...").
llvm::Expected<PlanRecord> decodePlan(const AttrDict &Attrs);
/// The plan the module records (its attributes), decoded; an error when it
/// records none.
llvm::Expected<PlanRecord> getModulePlan(const Module &M);

/// The configuration and predictions as one dict (the `plan` attribute).
AttrDict encodePlanConfig(const PlanConfig &C, const PlanPredicted &P);

/// Checks that the record's numbers agree: global_batch == mbs *
/// num_microbatches * dp; tp * pp * dp == num_gpus; whole nodes (or one
/// partial node); layers_per_stage and stage_layers have pp * vpp entries
/// and layers_per_stage sums to layers; heads divisible by tp; the
/// schedule's rules (interleaved: vpp >= 2 and num_microbatches % pp == 0,
/// the others vpp == 1); offload of parameters only with ZeRO-3, of the
/// optimizer only with ZeRO >= 1. Every violation is reported, one per
/// line, each prefixed with Prefix.
llvm::Error checkPlanInvariants(const PlanRecord &R, llvm::StringRef Prefix);

/// plan.json: the plan's attributes as a JSON document (two-space indent,
/// keys sorted, a final newline).
std::string planToJSON(const PlanRecord &R);
/// Reads a plan.json. Errors name FileName and the key.
llvm::Expected<PlanRecord> parsePlanJSON(llvm::StringRef Text,
                                         llvm::StringRef FileName);

/// Attributes as JSON and back: dicts are objects, lists and int/float
/// lists arrays, ints integers; a JSON number with an integral value reads
/// as an int. Dense tensors and shardings have no JSON form (asserted).
llvm::json::Value attributeToJSON(const Attribute &A);
Attribute attributeFromJSON(const llvm::json::Value &V);

} // namespace autopar

#endif // AUTOPAR_IR_PLAN_H
