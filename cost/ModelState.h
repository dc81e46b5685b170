//===- ModelState.h - Weights, gradients and optimizer states -*- C++ -*-===//
//
// Memory of the model states on one rank and the time to update them, for
// mixed-precision training (Micikevicius et al. 2018): 16-bit weights and
// gradients, and an fp32 master copy with the optimizer's fp32 states.
// Adam keeps 12 bytes per parameter (master, momentum, variance: the K = 12
// of Rajbhandari et al. 2020, "ZeRO", section 3.1); SGD with momentum 8.
// ZeRO stage 1 divides the optimizer states over the data-parallel group,
// stage 2 the gradients too, stage 3 the weights too. Offload moves the
// optimizer states (and the master weights) to host memory or NVMe, where
// the optimizer step runs (ZeRO-Offload, Ren et al. 2021), and with stage 3
// may move the 16-bit weights too, fetched layer by layer with prefetch
// (ZeRO-Infinity, Rajbhandari et al. 2021).
//
//===----------------------------------------------------------------------===//

#ifndef AUTOPAR_COST_MODELSTATE_H
#define AUTOPAR_COST_MODELSTATE_H

#include "cost/Cluster.h"

#include "llvm/ADT/StringRef.h"

#include <algorithm>
#include <optional>

namespace autopar {

enum class OptimizerKind { AdamW, SGD };
llvm::StringRef getOptimizerName(OptimizerKind K);
std::optional<OptimizerKind> parseOptimizerName(llvm::StringRef Name);

// OffloadKind and its names are the plan's (ir/Plan.h).

/// The largest data-parallel gradient bucket, bytes: PyTorch DDP's default
/// bucket_cap_mb of 25 (torch.nn.parallel.DistributedDataParallel), which
/// passes/InsertGradSync.cpp also packs gradients into by default.
constexpr double GradientBucketBytes = 25.0 * 1024 * 1024;

/// Elements of a data-parallel bucket over DP ranks as Megatron-Core sizes
/// them: max(4e7, 1e6 x DP) parameters
/// (core.distributed.DistributedDataParallelConfig.bucket_size: "larger DP
/// sizes need larger buckets to ensure collectives do not become
/// latency-bound"), the buckets its distributed optimizer all-gathers the
/// parameters and reduces the gradients in. passes/InsertGradSync.cpp
/// gathers ZeRO-1/2's 16-bit copies in such buckets; the search reduces
/// gradients in them where they fit (ir/PlanKnobs.def, grad-bucket).
inline double getDataParallelBucketElements(unsigned DP) {
  return std::max(4e7, 1e6 * DP);
}

struct ModelStateConfig {
  /// Parameter elements this rank computes with, after tensor and pipeline
  /// parallelism have divided them (before ZeRO).
  double Params = 0;
  /// Of Params, the elements ZeRO leaves whole: parameters whose dimension
  /// 0 the data-parallel size does not divide keep whole weights,
  /// gradients and optimizer states (passes/InsertGradSync.cpp).
  double WholeParams = 0;
  /// The padding elements ZeRO's shards add, over all the ranks (rows the
  /// data-parallel size does not divide are padded to a multiple of it).
  double PaddingParams = 0;
  unsigned DataParallel = 1;
  unsigned ZeroStage = 0;
  OptimizerKind Optimizer = OptimizerKind::AdamW;
  OffloadKind Offload = OffloadKind::None;
  /// Bytes of a 16-bit (or fp32) weight and gradient.
  double WeightBytes = 2, GradBytes = 2;
  /// Mixed precision keeps an fp32 master copy of the weights with the
  /// optimizer states (Micikevicius et al. 2018); fp32 training does not.
  bool MasterWeights = true;
  /// fp16's dynamic loss scaling: the gradients are unscaled (read and
  /// written once more) before the clipping (passes/ClipGradients.cpp).
  bool LossScaling = false;
  /// Elements of the largest parameter tensor: a gradient larger than a
  /// bucket is a bucket of its own.
  double LargestParam = 0;
  /// The most elements two consecutive uses of parameters read (a use: the
  /// parameters of one node, a fused Linear's weight and bias): ZeRO-3
  /// gathers each use's parameters and the next use's while it runs, and
  /// offload fetches them so (passes/InsertGradSync.cpp,
  /// passes/Offload.cpp; cost/HeldParams.h).
  double UsePairParams = 0;
  /// The most elements two consecutive parameters hold: an offloaded
  /// optimizer step fetches one parameter's state and prefetches the next.
  double StepPairParams = 0;
  /// Micro-batches per step: ZeRO-1 over one micro-batch reduce-scatters
  /// each gradient bucket as the backward produces it, as ZeRO-2 does, and
  /// never holds the whole gradients.
  unsigned MicroBatches = 1;
  /// The cap of a data-parallel gradient bucket, bytes.
  double BucketBytes = GradientBucketBytes;
};

struct ModelStateMemory {
  /// GradBytes includes GradSyncBytes: what synchronizing the gradients
  /// holds on top of them for a moment (getModelStateMemory).
  double WeightBytes = 0, GradBytes = 0, OptimizerBytes = 0, GradSyncBytes = 0;
  /// ZeRO-3's gathered parameters (current and prefetched use).
  double GatherBufferBytes = 0;
  /// Offloaded state on the device while fetched for its use (included in
  /// WeightBytes and OptimizerBytes): a use's weights and the next's, or an
  /// optimizer step's state and the next parameter's.
  double FetchBufferBytes = 0;
  /// Bytes this rank keeps in host memory or on NVMe.
  double HostBytes = 0, NvmeBytes = 0;

  double deviceBytes() const {
    return WeightBytes + GradBytes + OptimizerBytes + GatherBufferBytes;
  }
};

/// Optimizer-state bytes per parameter, the fp32 master included when
/// MasterWeights.
double optimizerBytesPerParam(OptimizerKind K, bool MasterWeights = true);

/// The model-state configuration of training at precision P: 16-bit
/// weights and gradients over fp32 masters, or fp32 throughout.
void setTrainingPrecision(ModelStateConfig &C, Precision P);

/// Checks the combination (offloading the weights needs ZeRO-3, stages are
/// 0-3); the message names the option to change.
llvm::Error validateModelState(const ModelStateConfig &C);

ModelStateMemory getModelStateMemory(const ModelStateConfig &C);

/// Seconds of the optimizer step per training step on one rank: on the
/// device, a memory-bound pass over the states it holds; offloaded, the
/// gradients go down and the updated weights come back over PCIe (or NVMe)
/// and the host runs the step at its memory bandwidth.
double optimizerStepSeconds(const ModelStateConfig &C, const Cluster &Cl);

/// Host memory bandwidth available to one GPU's share of the host, bytes/s:
/// DGX A100 and H100 nodes have two sockets of eight DDR channels (AMD EPYC
/// 7742: 8 x DDR4-3200 = 204.8 GB/s per socket, AMD datasheet; Intel Xeon
/// 8480C: 8 x DDR5-4800 = 307.2 GB/s per socket, Intel ARK), shared by 8
/// GPUs.
double hostMemoryBytesPerSecPerGpu(const Cluster &Cl);

/// Host memory one GPU's share of its node holds, bytes, what offloaded
/// state must fit in; 0 where the host is the device (`cpu`) and nothing
/// is checked.
double hostMemoryBytesPerGpu(const Cluster &Cl);

} // namespace autopar

#endif // AUTOPAR_COST_MODELSTATE_H
