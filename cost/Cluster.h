//===- Cluster.h - Devices, nodes and links of a cluster --------*- C++ -*-===//
//
// The cluster model every cost query starts from: the device (memory, peak
// rates by precision, achievable memory bandwidth, the figures the GEMM
// model needs) and the links of the usual node, per GPU and per direction,
// at each level: NVLink inside a node, the NICs between nodes, PCIe to host
// memory, NVMe. A Cluster is a device, a GPU count, a node size and the
// links it uses.
//
// Clusters come from the device catalog (Devices.def, every figure with its
// source) through makeCluster (`--gpu NAME --gpus N --gpus-per-node K`), or
// from a JSON file (`--cluster FILE.json`) that may inherit from a catalog
// device. docs/CostModel.md ("Cluster") describes both and the file format.
//
//===----------------------------------------------------------------------===//

#ifndef AUTOPAR_COST_CLUSTER_H
#define AUTOPAR_COST_CLUSTER_H

#include "ir/Plan.h"

#include "llvm/ADT/ArrayRef.h"
#include "llvm/ADT/StringRef.h"
#include "llvm/Support/Error.h"
#include "llvm/Support/JSON.h"

#include <cstdint>
#include <memory>
#include <optional>
#include <string>

namespace autopar {

// Precision and its names are the plan's (ir/Plan.h).
/// Bytes per element of the operands a GEMM of this precision reads.
unsigned getPrecisionBytes(Precision P);

/// One level of the interconnect, per GPU and per direction: the bandwidth a
/// large transfer achieves (nccl-tests bus bandwidth for GPU links, not the
/// line rate) and the latency of one step (one hop of a ring).
struct LinkLevel {
  double BytesPerSec = 0;
  double LatencySec = 0;
};

struct GemmCalibration;

/// How collectives move data. NCCL picks, per call, the fastest of its three
/// protocols (LL, LL128, Simple), each with its own latencies and share of
/// the link bandwidth (docs/CostModel.md, "Protocols"); a transport with
/// one protocol (MPI on the `cpu` device) runs at the links' figures.
enum class CollectiveProtocols { Nccl, Single };
llvm::StringRef getCollectiveProtocolsName(CollectiveProtocols P);
std::optional<CollectiveProtocols> parseCollectiveProtocols(llvm::StringRef);

/// One device, as the catalog or a cluster file describes it.
struct DeviceSpec {
  /// "a100-40gb", "a100-80gb", "h100", "h200", "cpu", or a cluster file's.
  std::string Name;
  uint64_t MemoryBytes = 0;
  /// Dense peak FLOP/s per device, indexed by Precision.
  double PeakFlopsByPrecision[NumPrecisions] = {};
  /// Dense peak of integer products (int8 codes, i32 sums) per second;
  /// 0 when unknown (a cluster file that does not say), then priced at the
  /// fp16 peak.
  double PeakInt8OpsPerSec = 0;
  /// Memory bandwidth from the datasheet, and the fraction of it that a
  /// streaming kernel achieves.
  double HbmBytesPerSec = 0;
  double HbmEfficiency = 1;
  /// Streaming multiprocessors (cores for `cpu`): the GEMM model's wave
  /// quantization divides tiles over them.
  unsigned ComputeUnits = 1;
  /// The fraction of peak a large, well-shaped GEMM approaches (the GEMM
  /// model's asymptote, docs/CostModel.md "GEMM efficiency").
  double GemmEfficiency = 1;
  /// The most any shape reaches: the measured maximum (MAMF is a maximum
  /// over a sweep of shapes), which larger shapes than the one that reached
  /// it do not exceed; 1 for none.
  double GemmEfficiencyMax = 1;
  /// The fraction of their isolated rates (the GEMM model, achievable
  /// memory bandwidth) that kernels sustain inside a training step: clocks
  /// under sustained power, caches and SMs shared with communication,
  /// launch gaps, the framework's own work. Fitted to published runs
  /// (Devices.def); 1 where measured in place (`cpu`). Op times are divided
  /// by it; collectives have their own measured bandwidths and are not.
  double SustainedFraction = 1;
  /// Fixed cost of one kernel (launch gap, prologue); the analytic GEMM
  /// model adds it, and per-op costs can.
  double KernelLaunchSec = 0;
  unsigned DefaultGpusPerNode = 1;
  /// The links of the usual node (see Cluster). Nvme is per node.
  LinkLevel IntraNode, InterNode, HostLink, Nvme;
  /// Fixed cost of one collective call (NCCL's base latency).
  double CollectiveLatencySec = 0;
  /// NCCL's protocols, or one (the links' latencies and bandwidths are then
  /// those of the one; with NCCL they are the LL protocol's latencies and
  /// the Simple protocol's bandwidth).
  CollectiveProtocols Protocols = CollectiveProtocols::Nccl;
  /// Measured GEMM curves that replace the analytic model for the
  /// precisions they cover; null for none. Immutable once built, so copies
  /// of a DeviceSpec share it.
  std::shared_ptr<const GemmCalibration> Calibration;

  double PeakFlops(Precision P) const {
    return PeakFlopsByPrecision[static_cast<unsigned>(P)];
  }
  /// The peak an integer product runs at.
  double integerProductPeak() const {
    return PeakInt8OpsPerSec > 0 ? PeakInt8OpsPerSec
                                 : PeakFlops(Precision::FP16);
  }
  double achievableHbmBytesPerSec() const {
    return HbmBytesPerSec * HbmEfficiency;
  }
  /// A kernel's time inside a training step, from its time alone.
  double inStepSeconds(double IsolatedSeconds) const {
    return IsolatedSeconds / SustainedFraction;
  }
};

/// The devices of Devices.def, in its order.
llvm::ArrayRef<DeviceSpec> getDeviceCatalog();
/// The catalog device named Name (case-insensitive), or null.
const DeviceSpec *lookupDevice(llvm::StringRef Name);

/// The most GPUs and GPUs per node a cluster may have; larger requests are
/// mistakes, not plans.
constexpr int64_t MaxGpus = 1 << 20;
constexpr int64_t MaxGpusPerNode = 1024;

struct Cluster {
  DeviceSpec Device;
  unsigned NumGpus = 1;
  /// GPUs of one node. A request for fewer GPUs than a node holds is a
  /// single partial node: GpusPerNode == NumGpus.
  unsigned GpusPerNode = 1;
  /// NVLink (shared memory for `cpu`), per GPU and direction.
  LinkLevel IntraNode;
  /// Between nodes: each GPU's share of its node's NICs, per direction.
  LinkLevel InterNode;
  /// PCIe to host memory, per GPU when every GPU of the node transfers at
  /// once (offload), per direction.
  LinkLevel HostLink;
  /// NVMe of one node, all drives together (not per GPU; see
  /// nvmeBytesPerSecPerGpu).
  LinkLevel Nvme;
  double CollectiveLatencySec = 0;

  unsigned numNodes() const {
    return (NumGpus + GpusPerNode - 1) / GpusPerNode;
  }
  /// Each GPU's share of its node's NVMe bandwidth.
  double nvmeBytesPerSecPerGpu() const {
    return Nvme.BytesPerSec / GpusPerNode;
  }
};

/// A cluster of NumGpus catalog devices, GpusPerNode per node (0: the
/// device's default). Errors name the option (--gpu, --gpus,
/// --gpus-per-node) and say what is valid.
llvm::Expected<Cluster> makeCluster(llvm::StringRef DeviceName, int64_t NumGpus,
                                    int64_t GpusPerNode);

/// Reads a cluster file (docs/CostModel.md, "Cluster file"). NumGpus and
/// GpusPerNode, when positive, replace the file's num_gpus and
/// gpus_per_node (for `--cluster F --gpus N`). Errors name the file and the
/// key.
llvm::Expected<Cluster> loadClusterFile(llvm::StringRef Path,
                                        int64_t NumGpus = 0,
                                        int64_t GpusPerNode = 0);
/// Reads a cluster description from JSON text; FileName names it in errors.
/// Relative calibration paths are resolved against BaseDir.
llvm::Expected<Cluster> parseClusterJSON(llvm::StringRef Text,
                                         llvm::StringRef FileName,
                                         llvm::StringRef BaseDir = "",
                                         int64_t NumGpus = 0,
                                         int64_t GpusPerNode = 0);

/// The cluster as a complete cluster file (no `base`, calibration inline):
/// parseClusterJSON reads it back to an equal cluster. Printed with
/// llvm::json, whose objects print with sorted keys, so the text is
/// deterministic.
llvm::json::Value clusterToJSON(const Cluster &C);

} // namespace autopar

#endif // AUTOPAR_COST_CLUSTER_H
