//===- PlanRecord.h - A plan as read back from plan.json --------*- C++ -*-===//
//
// What the launch-file emitters need from a plan, read from the plan.json
// that `autopar -o DIR` writes: the model's shape, the cluster's size and
// the parallel configuration. parsePlanJSON checks types and ranges and
// names the file and the key in every error; checkBatchInvariants checks
// that the numbers agree with each other (batch sizes, GPU counts, the
// stage cut, the schedule's rules, ZeRO and offload), which every emitter
// relies on.
//
//===----------------------------------------------------------------------===//

#ifndef AUTOPAR_CODEGEN_PLANRECORD_H
#define AUTOPAR_CODEGEN_PLANRECORD_H

#include "cost/ActivationMemory.h"
#include "cost/ModelState.h"
#include "planner/Schedule.h"

#include "llvm/ADT/StringRef.h"
#include "llvm/Support/Error.h"

#include <cstdint>
#include <string>
#include <vector>

namespace autopar {

// OffloadKind (cost/ModelState.h) and Recompute (cost/ActivationMemory.h)
// are the planner's own, with their names.
/// "cpu" or "nvme" for an offload, "" for none.
llvm::StringRef getOffloadDevice(OffloadKind K);
/// True when parameters are offloaded too (Cpu, NVMe), which needs ZeRO-3.
bool offloadsParameters(OffloadKind K);

struct PlanRecord {
  /// The file the record was read from, for messages.
  std::string FileName;
  /// Top level.
  std::string AutoparVersion, Model, ModelSha256;
  /// Samples per training step.
  int64_t GlobalBatch = 0;

  struct ClusterInfo {
    std::string Name;
    int64_t NumGpus = 0;
    int64_t GpusPerNode = 0;
  } Cluster;

  struct ShapeInfo {
    int64_t Layers = 0, Hidden = 0, Heads = 0, SeqLength = 0, Vocab = 0;
    /// Transformer blocks per virtual stage in model order (pp * vpp
    /// entries; embedding and head not counted).
    std::vector<int64_t> LayersPerStage;
  } Shape;

  struct PlanInfo {
    int64_t TP = 1, PP = 1, DP = 1, VPP = 1;
    /// Micro-batch size and micro-batches per step (per data-parallel rank).
    int64_t MicroBatchSize = 1, NumMicroBatches = 1;
    ScheduleKind Schedule = ScheduleKind::OneFOneB;
    /// 0 to 3.
    int64_t ZeroStage = 0;
    OffloadKind Offload = OffloadKind::None;
    Recompute Recomputation = Recompute::None;
    bool SequenceParallel = false;
    /// bf16 or fp16 (over fp32 master weights), or fp32; bf16 when the
    /// plan.json has no `precision` (plans written before it was recorded).
    Precision TrainPrecision = Precision::BF16;
    /// Plans written before it was recorded priced materialized attention.
    AttentionKernel Attention = AttentionKernel::Materialized;
    /// Data-parallel communication overlapped with compute; plans written
    /// before it was recorded were priced with it on.
    bool DpOverlap = true;
    /// Units per virtual stage, embedding and head units included.
    std::vector<int64_t> StageLayers;
    /// Predicted seconds per step.
    double StepTimeSeconds = 0;
  } Plan;
};

/// Reads a plan.json. Errors name FileName and the key ("plan.tp"): a
/// malformed document, a missing key, a value of the wrong type or out of
/// range, an unknown schedule, offload or recompute name.
llvm::Expected<PlanRecord> parsePlanJSON(llvm::StringRef Text,
                                         llvm::StringRef FileName);

/// Checks that the record's numbers agree: global_batch == mbs *
/// num_microbatches * dp; tp * pp * dp == num_gpus; whole nodes (or one
/// partial node); layers_per_stage and stage_layers have pp * vpp entries
/// and layers_per_stage sums to layers; heads divisible by tp; the
/// schedule's rules (interleaved: vpp >= 2 and num_microbatches % pp == 0,
/// the others vpp == 1); offload of parameters only with ZeRO-3, of the
/// optimizer only with ZeRO >= 1. Every violation is reported, one per
/// line, each naming the file.
llvm::Error checkBatchInvariants(const PlanRecord &R);

} // namespace autopar

#endif // AUTOPAR_CODEGEN_PLANRECORD_H
