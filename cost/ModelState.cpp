//===- ModelState.cpp - Weights, gradients and optimizer states -----------===//

#include "cost/ModelState.h"

#include "llvm/ADT/StringSwitch.h"

#include <algorithm>

using namespace autopar;
using namespace llvm;

StringRef autopar::getOptimizerName(OptimizerKind K) {
  return K == OptimizerKind::AdamW ? "adamw" : "sgd";
}

std::optional<OptimizerKind> autopar::parseOptimizerName(StringRef Name) {
  if (Name == "adamw" || Name == "adam")
    return OptimizerKind::AdamW;
  if (Name == "sgd")
    return OptimizerKind::SGD;
  return std::nullopt;
}

double autopar::optimizerBytesPerParam(OptimizerKind K, bool MasterWeights) {
  // Adam's two fp32 moments or SGD's fp32 momentum, plus the fp32 master
  // weight under mixed precision (ZeRO's 12 bytes for mixed-precision Adam).
  return (K == OptimizerKind::AdamW ? 8 : 4) + (MasterWeights ? 4 : 0);
}

void autopar::setTrainingPrecision(ModelStateConfig &C, Precision P) {
  C.WeightBytes = C.GradBytes = getPrecisionBytes(P);
  C.MasterWeights = getPrecisionBytes(P) < 4;
  C.LossScaling = P == Precision::FP16;
}

Error autopar::validateModelState(const ModelStateConfig &C) {
  if (C.ZeroStage > 3)
    return createStringError(inconvertibleErrorCode(),
                             "zero=" + Twine(C.ZeroStage) +
                                 " is not a ZeRO stage; use 0, 1, 2 or 3");
  if (C.DataParallel < 1)
    return createStringError(inconvertibleErrorCode(),
                             "the data-parallel degree must be at least 1");
  bool Weights =
      C.Offload == OffloadKind::AllCpu || C.Offload == OffloadKind::AllNvme;
  if (Weights && C.ZeroStage != 3)
    return createStringError(
        inconvertibleErrorCode(),
        "offload=" + getOffloadName(C.Offload) +
            " moves the weights, which needs zero=3 (ZeRO-Infinity); use "
            "offload=optimizer-cpu with zero=" +
            Twine(C.ZeroStage));
  return Error::success();
}

static bool offloadsOptimizer(OffloadKind K) { return K != OffloadKind::None; }

static bool offloadsToNvme(OffloadKind K) {
  return K == OffloadKind::OptimizerNvme || K == OffloadKind::AllNvme;
}

ModelStateMemory autopar::getModelStateMemory(const ModelStateConfig &C) {
  ModelStateMemory M;
  double Nd = std::max(1u, C.DataParallel);
  double Params = C.Params;
  // What ZeRO divides over the ranks: the parameters it shards, not those
  // it leaves whole.
  double Whole = std::min(C.WholeParams, Params);
  auto Divided = [&](double PerParam) {
    return (Params - Whole + C.PaddingParams) * PerParam / Nd +
           Whole * PerParam;
  };
  // What a rank holds of Elements spread over the parameters alike.
  auto DividedShare = [&](double Elements) {
    return Params > 0 ? Divided(Elements / Params) : Elements / Nd;
  };
  double Weights = Params * C.WeightBytes;
  // ZeRO-1/2 gather an fp32 parameter in place into its home, padding
  // included (runtime/Executor.cpp); 16-bit copies are sliced to whole.
  if (Nd > 1 && (C.ZeroStage == 1 || C.ZeroStage == 2) && !C.MasterWeights)
    Weights += C.PaddingParams * C.WeightBytes;
  double Grads = Params * C.GradBytes;
  double OptimizerPerParam =
      optimizerBytesPerParam(C.Optimizer, C.MasterWeights);
  double Optimizer = Params * OptimizerPerParam;
  if (C.ZeroStage >= 1)
    Optimizer = Divided(OptimizerPerParam);
  // Reduce-scattered as the backward produces them: only shards are kept.
  bool Scattered =
      C.ZeroStage >= 2 || (C.ZeroStage == 1 && C.MicroBatches <= 1);
  if (Scattered)
    Grads = Divided(C.GradBytes);
  if (C.ZeroStage >= 3) {
    Weights = Divided(C.WeightBytes);
    // The use being computed and the one being prefetched, whole.
    if (Nd > 1)
      M.GatherBufferBytes = C.UsePairParams * C.WeightBytes;
  }
  if (Nd > 1) {
    // Synchronizing a bucket (passes/InsertGradSync.cpp) concatenates its
    // gradients into one buffer, reduces that into another and splits the
    // result back out. All-reduced, the bucket's copy and the reduced
    // buffer are live with the whole gradients: one bucket on top of them.
    // Reduce-scattered, the bucket's whole gradients and its copy are live
    // with the shards of the earlier buckets (its own shards not yet):
    // 2B - B/Nd on top of the shards. A gradient larger than the cap is a
    // bucket of its own, not copied: itself on top.
    double Whole = Params * C.GradBytes;
    double Bucket = std::min(C.BucketBytes, Whole);
    double Largest = std::min(C.LargestParam * C.GradBytes, Whole);
    M.GradSyncBytes = Scattered ? std::max(2 * Bucket - Bucket / Nd, Largest)
                                : std::max(Bucket, Largest);
  }
  M.WeightBytes = Weights;
  M.GradBytes = Grads + M.GradSyncBytes;
  M.OptimizerBytes = Optimizer;
  bool OffloadsWeights =
      C.Offload == OffloadKind::AllCpu || C.Offload == OffloadKind::AllNvme;
  if (offloadsOptimizer(C.Offload)) {
    double Off = Optimizer;
    // ZeRO-Offload keeps the gradients on the host too, after reducing
    // them (passes/Offload.cpp evicts each after its producer). On the
    // device: a gradient being produced and the one an optimizer step
    // fetched (or a shared parameter's two terms).
    Off += Grads;
    M.GradBytes = M.GradSyncBytes + 2 * C.LargestParam * C.GradBytes;
    // The step streams each parameter's state (its weight too when the
    // weights are offloaded) and prefetches the next parameter's.
    double StepBytes = optimizerBytesPerParam(C.Optimizer, OffloadsWeights);
    M.OptimizerBytes = DividedShare(C.StepPairParams) * StepBytes;
    M.FetchBufferBytes = M.OptimizerBytes;
    (offloadsToNvme(C.Offload) ? M.NvmeBytes : M.HostBytes) += Off;
  }
  if (OffloadsWeights) {
    (C.Offload == OffloadKind::AllNvme ? M.NvmeBytes : M.HostBytes) +=
        M.WeightBytes;
    // A use's shards and the next use's, fetched. The step streams after
    // the last use: the device holds the larger of the two, the step's
    // excess counted as optimizer state.
    M.WeightBytes = DividedShare(C.UsePairParams) * C.WeightBytes;
    M.OptimizerBytes = std::max(0.0, M.OptimizerBytes - M.WeightBytes);
    M.FetchBufferBytes = M.WeightBytes + M.OptimizerBytes;
  }
  return M;
}

double autopar::hostMemoryBytesPerSecPerGpu(const Cluster &Cl) {
  // Two sockets per node; DDR4-3200 (A100 nodes) or DDR5-4800 (H100/H200
  // nodes), eight channels each, 8 bytes per transfer.
  bool Ddr5 =
      Cl.Device.Name.rfind("h1", 0) == 0 || Cl.Device.Name.rfind("h2", 0) == 0;
  double PerSocket = 8 * 8 * (Ddr5 ? 4800e6 : 3200e6);
  return 2 * PerSocket / std::max(1u, Cl.GpusPerNode);
}

double autopar::hostMemoryBytesPerGpu(const Cluster &Cl) {
  // The DGX systems' system memory: DGX A100 320GB 1 TB, DGX A100 640GB
  // 2 TB (NVIDIA DGX A100 datasheet), DGX H100 and DGX H200 2 TB (their
  // datasheets).
  StringRef Name = Cl.Device.Name;
  double Node =
      Name == "a100-40gb" ? 1e12
      : Name == "a100-80gb" || Name.startswith("h1") || Name.startswith("h2")
          ? 2e12
          : 0;
  return Node / std::max(1u, Cl.GpusPerNode);
}

double autopar::optimizerStepSeconds(const ModelStateConfig &C,
                                     const Cluster &Cl) {
  double Nd = std::max(1u, C.DataParallel);
  // The parameters whose update this rank computes: its shards, and the
  // parameters ZeRO leaves whole.
  double Whole = std::min(C.WholeParams, C.Params);
  double Owned = C.ZeroStage >= 1
                     ? (C.Params - Whole + C.PaddingParams) / Nd + Whole
                     : C.Params;
  // Read the gradient, the states and the master weight, write the states,
  // the master and the 16-bit weight.
  double StateBytes = optimizerBytesPerParam(C.Optimizer, C.MasterWeights);
  double Bytes = Owned * (C.GradBytes + 2 * StateBytes + C.WeightBytes);
  // Global-norm clipping on the device before the step, which every plan
  // has (passes/ClipGradients.cpp): each gradient read for its sum of
  // squares, then read and written scaled by the coefficient. (Its scalar
  // all-reduces are latency only, a few microseconds.)
  double Bandwidth = Cl.Device.achievableHbmBytesPerSec();
  // fp16 plans unscale each gradient first: one more read and write.
  double Passes = C.LossScaling ? 5 : 3;
  double Clip = Bandwidth > 0 ? Owned * Passes * C.GradBytes / Bandwidth : 0;
  if (!offloadsOptimizer(C.Offload))
    return Clip + (Bandwidth > 0 ? Bytes / Bandwidth : 0);
  double Link = offloadsToNvme(C.Offload) ? Cl.nvmeBytesPerSecPerGpu()
                                          : Cl.HostLink.BytesPerSec;
  double Transfer = Link > 0 ? Owned * (C.GradBytes + C.WeightBytes) / Link : 0;
  double Host = hostMemoryBytesPerSecPerGpu(Cl);
  double Step = Host > 0 ? Bytes / Host : 0;
  // NVMe also streams the states in and out.
  if (offloadsToNvme(C.Offload) && Link > 0)
    Step = std::max(Step, Owned * 2 * StateBytes / Link);
  return Clip + Transfer + Step;
}
