//===- Cluster.cpp - Devices, nodes and links of a training cluster -------===//

#include "cost/Cluster.h"
#include "cost/GemmEfficiency.h"

#include "llvm/ADT/STLExtras.h"
#include "llvm/ADT/StringSet.h"
#include "llvm/ADT/Twine.h"
#include "llvm/Support/MemoryBuffer.h"
#include "llvm/Support/Path.h"

#include <vector>

using namespace autopar;
using llvm::Error;
using llvm::Expected;
using llvm::StringRef;
using llvm::Twine;

static Error makeError(const Twine &Message) {
  return llvm::createStringError(llvm::inconvertibleErrorCode(), Message);
}

//===----------------------------------------------------------------------===//
// Precisions
//===----------------------------------------------------------------------===//

unsigned autopar::getPrecisionBytes(Precision P) {
  return P == Precision::BF16 || P == Precision::FP16 ? 2 : 4;
}

//===----------------------------------------------------------------------===//
// Collective protocols
//===----------------------------------------------------------------------===//

StringRef autopar::getCollectiveProtocolsName(CollectiveProtocols P) {
  return P == CollectiveProtocols::Nccl ? "nccl" : "single";
}

std::optional<CollectiveProtocols>
autopar::parseCollectiveProtocols(StringRef Name) {
  if (Name == "nccl")
    return CollectiveProtocols::Nccl;
  if (Name == "single")
    return CollectiveProtocols::Single;
  return std::nullopt;
}

//===----------------------------------------------------------------------===//
// The catalog
//===----------------------------------------------------------------------===//

namespace {
struct FlopsRow {
  double ByPrecision[NumPrecisions];
  double Int8;
};
using CalibrationFn = std::shared_ptr<const GemmCalibration> (*)();

DeviceSpec
makeDevice(StringRef Name, uint64_t MemoryBytes, FlopsRow Flops,
           double HbmBytesPerSec, double HbmEfficiency, unsigned ComputeUnits,
           double GemmEfficiency, double GemmEfficiencyMax,
           double SustainedFraction, double KernelLaunchSec,
           unsigned GpusPerNode, LinkLevel IntraNode, LinkLevel InterNode,
           LinkLevel HostLink, LinkLevel Nvme, double CollectiveLatencySec,
           CollectiveProtocols Protocols, CalibrationFn Calibration) {
  DeviceSpec D;
  D.Name = Name.str();
  D.MemoryBytes = MemoryBytes;
  for (unsigned P = 0; P < NumPrecisions; ++P)
    D.PeakFlopsByPrecision[P] = Flops.ByPrecision[P];
  D.PeakInt8OpsPerSec = Flops.Int8;
  D.HbmBytesPerSec = HbmBytesPerSec;
  D.HbmEfficiency = HbmEfficiency;
  D.ComputeUnits = ComputeUnits;
  D.GemmEfficiency = GemmEfficiency;
  D.GemmEfficiencyMax = GemmEfficiencyMax;
  D.SustainedFraction = SustainedFraction;
  D.KernelLaunchSec = KernelLaunchSec;
  D.DefaultGpusPerNode = GpusPerNode;
  D.IntraNode = IntraNode;
  D.InterNode = InterNode;
  D.HostLink = HostLink;
  D.Nvme = Nvme;
  D.CollectiveLatencySec = CollectiveLatencySec;
  D.Protocols = Protocols;
  if (Calibration)
    D.Calibration = Calibration();
  return D;
}
} // namespace

llvm::ArrayRef<DeviceSpec> autopar::getDeviceCatalog() {
  static const std::vector<DeviceSpec> Catalog = [] {
    std::vector<DeviceSpec> Devices;
#define FLOPS(Fp32, Tf32, Bf16, Fp16, Int8)                                    \
  FlopsRow { {Fp32, Tf32, Bf16, Fp16}, Int8 }
#define LINK(BytesPerSec, LatencySec)                                          \
  LinkLevel { BytesPerSec, LatencySec }
#define DEVICE(Id, Name, MemoryBytes, Flops, HbmBytesPerSec, HbmEfficiency,    \
               ComputeUnits, GemmEfficiency, GemmEfficiencyMax,                \
               SustainedFraction, KernelLaunchSec, GpusPerNode, IntraNode,     \
               InterNode, HostLink, Nvme, CollectiveLatencySec, Protocols,     \
               Calibration)                                                    \
  Devices.push_back(makeDevice(                                                \
      Name, MemoryBytes, Flops, HbmBytesPerSec, HbmEfficiency, ComputeUnits,   \
      GemmEfficiency, GemmEfficiencyMax, SustainedFraction, KernelLaunchSec,   \
      GpusPerNode, IntraNode, InterNode, HostLink, Nvme, CollectiveLatencySec, \
      CollectiveProtocols::Protocols, Calibration));
#include "cost/Devices.def"
#undef DEVICE
#undef LINK
#undef FLOPS
    return Devices;
  }();
  return Catalog;
}

const DeviceSpec *autopar::lookupDevice(StringRef Name) {
  for (const DeviceSpec &D : getDeviceCatalog())
    if (Name.equals_insensitive(D.Name))
      return &D;
  return nullptr;
}

static std::string catalogNames() {
  std::string Names;
  for (const DeviceSpec &D : getDeviceCatalog())
    Names += (Names.empty() ? "" : ", ") + D.Name;
  return Names;
}

//===----------------------------------------------------------------------===//
// Sizes
//===----------------------------------------------------------------------===//

namespace {
/// How the user spelled the two sizes, for errors: "--gpus" or
/// "'num_gpus'"; Prefix ("FILE: ") starts messages about a file's sizes.
struct SizeNames {
  std::string Prefix, Gpus, PerNode;
};
} // namespace

/// Checks NumGpus and GpusPerNode (0: the device's default) and fills C.
/// Fewer GPUs than a node holds make a single partial node.
static Error setSizes(Cluster &C, int64_t NumGpus, int64_t GpusPerNode,
                      const SizeNames &Names) {
  auto Fail = [&](const Twine &Message) {
    return makeError(Names.Prefix + Message);
  };
  if (NumGpus < 1)
    return Fail(Names.Gpus + " " + Twine(NumGpus) + " must be at least 1");
  if (NumGpus > MaxGpus)
    return Fail(Names.Gpus + " " + Twine(NumGpus) + " is more than the " +
                Twine(MaxGpus) + " GPUs autopar plans for");
  if (GpusPerNode < 0)
    return Fail(Names.PerNode + " " + Twine(GpusPerNode) +
                " must be at least 1, or 0 for the device's default (" +
                Twine(C.Device.DefaultGpusPerNode) + " for " + C.Device.Name +
                ")");
  if (GpusPerNode > MaxGpusPerNode)
    return Fail(Names.PerNode + " " + Twine(GpusPerNode) + " is more than " +
                Twine(MaxGpusPerNode));
  int64_t PerNode = GpusPerNode ? GpusPerNode : C.Device.DefaultGpusPerNode;
  if (NumGpus > PerNode && NumGpus % PerNode != 0) {
    int64_t Below = NumGpus / PerNode * PerNode;
    return Fail(Names.Gpus + " " + Twine(NumGpus) + " is not a multiple of " +
                Names.PerNode + " " + Twine(PerNode) +
                "; the nearest valid counts are " + Twine(Below) + " and " +
                Twine(Below + PerNode) + ", and any count up to " +
                Twine(PerNode) + " (one partial node)");
  }
  C.NumGpus = NumGpus;
  C.GpusPerNode = std::min(NumGpus, PerNode);
  return Error::success();
}

static void copyLinks(Cluster &C) {
  C.IntraNode = C.Device.IntraNode;
  C.InterNode = C.Device.InterNode;
  C.HostLink = C.Device.HostLink;
  C.Nvme = C.Device.Nvme;
  C.CollectiveLatencySec = C.Device.CollectiveLatencySec;
}

Expected<Cluster> autopar::makeCluster(StringRef DeviceName, int64_t NumGpus,
                                       int64_t GpusPerNode) {
  const DeviceSpec *D = lookupDevice(DeviceName);
  if (!D)
    return makeError("unknown --gpu '" + DeviceName +
                     "'; valid devices: " + catalogNames());
  Cluster C;
  C.Device = *D;
  if (Error E =
          setSizes(C, NumGpus, GpusPerNode, {"", "--gpus", "--gpus-per-node"}))
    return E;
  copyLinks(C);
  return C;
}

//===----------------------------------------------------------------------===//
// Cluster files
//===----------------------------------------------------------------------===//

namespace {

/// Reads the keys of a cluster file, remembering which were given, with
/// errors that name the file and the key path.
class FileReader {
public:
  explicit FileReader(StringRef File) : File(File) {}

  Error error(const Twine &Key, const Twine &Message) const {
    return makeError(File + ": '" + Key + "': " + Message);
  }

  Error checkKeys(const llvm::json::Object &O, StringRef Prefix,
                  llvm::ArrayRef<StringRef> Valid) const {
    std::vector<std::string> Keys;
    for (const auto &KV : O)
      Keys.push_back(KV.first.str());
    llvm::sort(Keys);
    for (const std::string &Key : Keys)
      if (!llvm::is_contained(Valid, Key))
        return error(Prefix + Key,
                     "unknown key; valid keys: " + llvm::join(Valid, ", "));
    return Error::success();
  }

  /// O[Key] as an object, or null when absent.
  Expected<const llvm::json::Object *> object(const llvm::json::Object &O,
                                              StringRef Prefix, StringRef Key) {
    const llvm::json::Value *V = O.get(Key);
    if (!V)
      return nullptr;
    Seen.insert((Prefix + Key).str());
    if (const llvm::json::Object *Obj = V->getAsObject())
      return Obj;
    return error(Prefix + Key, "expected an object");
  }

  enum Range { Positive, NonNegative, Fraction };

  /// Sets Out to O[Key] when present: a number in Range.
  Error number(const llvm::json::Object &O, StringRef Prefix, StringRef Key,
               double &Out, Range R) {
    const llvm::json::Value *V = O.get(Key);
    if (!V)
      return Error::success();
    Seen.insert((Prefix + Key).str());
    auto X = V->getAsNumber();
    bool Valid = X && (R == Positive      ? *X > 0
                       : R == NonNegative ? *X >= 0
                                          : *X > 0 && *X <= 1);
    if (!Valid)
      return error(Prefix + Key, R == Positive ? "expected a positive number"
                                 : R == NonNegative
                                     ? "expected a number, 0 or more"
                                     : "expected a number in (0, 1]");
    Out = *X;
    return Error::success();
  }

  Error integer(const llvm::json::Object &O, StringRef Key, int64_t &Out) {
    const llvm::json::Value *V = O.get(Key);
    if (!V)
      return Error::success();
    Seen.insert(Key.str());
    auto X = V->getAsInteger();
    if (!X)
      return error(Key, "expected an integer");
    Out = *X;
    return Error::success();
  }

  void markSeen(StringRef Key) { Seen.insert(Key); }
  bool seen(StringRef Key) const { return Seen.count(Key); }

  StringRef File;

private:
  llvm::StringSet<> Seen;
};

Error readLink(FileReader &R, const llvm::json::Object &Links, StringRef Key,
               LinkLevel &Link) {
  auto O = R.object(Links, "links.", Key);
  if (!O)
    return O.takeError();
  if (!*O)
    return Error::success();
  std::string Prefix = ("links." + Key + ".").str();
  if (Error E = R.checkKeys(**O, Prefix, {"bytes_per_s", "latency_s"}))
    return E;
  if (Error E = R.number(**O, Prefix, "bytes_per_s", Link.BytesPerSec,
                         FileReader::Positive))
    return E;
  return R.number(**O, Prefix, "latency_s", Link.LatencySec,
                  FileReader::NonNegative);
}

/// The keys a file without `base` must give, in the order errors report.
const char *const RequiredKeys[] = {"name",
                                    "memory_bytes",
                                    "peak_flops.fp32",
                                    "peak_flops.tf32",
                                    "peak_flops.bf16",
                                    "peak_flops.fp16",
                                    "hbm_bytes_per_s",
                                    "hbm_efficiency",
                                    "compute_units",
                                    "gemm_efficiency",
                                    "links.intra_node.bytes_per_s",
                                    "links.intra_node.latency_s",
                                    "links.inter_node.bytes_per_s",
                                    "links.inter_node.latency_s",
                                    "links.host.bytes_per_s",
                                    "links.host.latency_s",
                                    "links.nvme.bytes_per_s",
                                    "links.nvme.latency_s"};

const char *const LinkKeys[] = {"intra_node", "inter_node", "host", "nvme"};

LinkLevel DeviceSpec::*const LinkFields[] = {
    &DeviceSpec::IntraNode, &DeviceSpec::InterNode, &DeviceSpec::HostLink,
    &DeviceSpec::Nvme};

} // namespace

/// Reads the device figures of a cluster file into D (which holds the base
/// device's, if any).
static Error readDevice(FileReader &R, const llvm::json::Object &Top,
                        DeviceSpec &D, StringRef BaseDir) {
  if (const llvm::json::Value *Name = Top.get("name")) {
    auto S = Name->getAsString();
    if (!S || S->empty())
      return R.error("name", "expected a non-empty string");
    D.Name = S->str();
    R.markSeen("name");
  }
  int64_t Memory = D.MemoryBytes;
  if (Error E = R.integer(Top, "memory_bytes", Memory))
    return E;
  if (R.seen("memory_bytes") && Memory < 1)
    return R.error("memory_bytes", "expected a positive integer");
  D.MemoryBytes = Memory;

  auto Flops = R.object(Top, "", "peak_flops");
  if (!Flops)
    return Flops.takeError();
  if (*Flops) {
    std::vector<StringRef> Names;
    for (unsigned P = 0; P < NumPrecisions; ++P)
      Names.push_back(getPrecisionName(static_cast<Precision>(P)));
    if (Error E = R.checkKeys(**Flops, "peak_flops.", Names))
      return E;
    for (unsigned P = 0; P < NumPrecisions; ++P)
      if (Error E = R.number(**Flops, "peak_flops.", Names[P],
                             D.PeakFlopsByPrecision[P], FileReader::Positive))
        return E;
  }

  if (Error E = R.number(Top, "", "peak_int8_ops", D.PeakInt8OpsPerSec,
                         FileReader::Positive))
    return E;
  if (Error E = R.number(Top, "", "hbm_bytes_per_s", D.HbmBytesPerSec,
                         FileReader::Positive))
    return E;
  if (Error E = R.number(Top, "", "hbm_efficiency", D.HbmEfficiency,
                         FileReader::Fraction))
    return E;
  int64_t Units = D.ComputeUnits;
  if (Error E = R.integer(Top, "compute_units", Units))
    return E;
  if (Units < 1 || Units > 1000000)
    return R.error("compute_units", "expected 1 to 1000000");
  D.ComputeUnits = Units;
  // A file's own asymptote is not capped by its base's measured maximum
  // unless it gives one too.
  if (Top.get("gemm_efficiency"))
    D.GemmEfficiencyMax = 1;
  if (Error E = R.number(Top, "", "gemm_efficiency", D.GemmEfficiency,
                         FileReader::Fraction))
    return E;
  if (Error E = R.number(Top, "", "gemm_efficiency_max", D.GemmEfficiencyMax,
                         FileReader::Fraction))
    return E;
  if (Error E = R.number(Top, "", "sustained_fraction", D.SustainedFraction,
                         FileReader::Fraction))
    return E;
  if (Error E = R.number(Top, "", "kernel_launch_s", D.KernelLaunchSec,
                         FileReader::NonNegative))
    return E;
  if (Error E = R.number(Top, "", "collective_latency_s",
                         D.CollectiveLatencySec, FileReader::NonNegative))
    return E;
  if (const llvm::json::Value *P = Top.get("collective_protocols")) {
    llvm::Optional<StringRef> Name = P->getAsString();
    std::optional<CollectiveProtocols> Protocols =
        Name ? parseCollectiveProtocols(*Name) : std::nullopt;
    if (!Protocols)
      return R.error("collective_protocols",
                     "expected \"nccl\" (NCCL's LL, LL128 and Simple) or "
                     "\"single\" (the links' figures, e.g. MPI)");
    D.Protocols = *Protocols;
  }

  auto Links = R.object(Top, "", "links");
  if (!Links)
    return Links.takeError();
  if (*Links) {
    if (Error E =
            R.checkKeys(**Links, "links.",
                        {LinkKeys[0], LinkKeys[1], LinkKeys[2], LinkKeys[3]}))
      return E;
    for (unsigned I = 0; I < 4; ++I)
      if (Error E = readLink(R, **Links, LinkKeys[I], D.*LinkFields[I]))
        return E;
  }

  if (const llvm::json::Value *Cal = Top.get("gemm_calibration")) {
    if (auto Path = Cal->getAsString()) {
      llvm::SmallString<256> Full(BaseDir);
      if (llvm::sys::path::is_absolute(*Path))
        Full = *Path;
      else
        llvm::sys::path::append(Full, *Path);
      if (Error E = loadCalibration(Full, D))
        return makeError(
            R.File + ": 'gemm_calibration': " + llvm::toString(std::move(E)));
    } else if (Cal->getAsObject()) {
      auto C =
          parseCalibration(*Cal, (R.File + ": gemm_calibration").str(), D.Name);
      if (!C)
        return C.takeError();
      addCalibration(D, std::move(*C));
    } else {
      return R.error("gemm_calibration",
                     "expected a file name or a calibration object");
    }
  }
  return Error::success();
}

Expected<Cluster> autopar::parseClusterJSON(StringRef Text, StringRef FileName,
                                            StringRef BaseDir, int64_t NumGpus,
                                            int64_t GpusPerNode) {
  auto V = llvm::json::parse(Text);
  if (!V)
    return makeError(FileName +
                     ": invalid JSON: " + llvm::toString(V.takeError()));
  const llvm::json::Object *Top = V->getAsObject();
  if (!Top)
    return makeError(FileName + ": expected a JSON object");
  FileReader R(FileName);
  if (Error E = R.checkKeys(
          *Top, "",
          {"base", "name", "num_gpus", "gpus_per_node", "memory_bytes",
           "peak_flops", "peak_int8_ops", "hbm_bytes_per_s", "hbm_efficiency",
           "compute_units", "gemm_efficiency", "gemm_efficiency_max",
           "sustained_fraction", "kernel_launch_s", "collective_latency_s",
           "collective_protocols", "links", "gemm_calibration"}))
    return E;

  Cluster C;
  bool HasBase = false;
  if (const llvm::json::Value *Base = Top->get("base")) {
    auto Name = Base->getAsString();
    if (!Name)
      return R.error("base", "expected a device name");
    const DeviceSpec *D = lookupDevice(*Name);
    if (!D)
      return R.error("base", "unknown device '" + *Name +
                                 "'; valid devices: " + catalogNames());
    C.Device = *D;
    HasBase = true;
  }
  if (Error E = readDevice(R, *Top, C.Device, BaseDir))
    return E;
  if (!HasBase)
    for (const char *Key : RequiredKeys)
      if (!R.seen(Key))
        return makeError(FileName + ": missing '" + Key +
                         "' (a cluster file without 'base' must give it)");

  // Sizes: the caller's (command line) win over the file's.
  int64_t FileGpus = 0, FilePerNode = 0;
  if (Error E = R.integer(*Top, "num_gpus", FileGpus))
    return E;
  if (Error E = R.integer(*Top, "gpus_per_node", FilePerNode))
    return E;
  if (!HasBase) {
    if (!R.seen("gpus_per_node"))
      return makeError(FileName + ": missing 'gpus_per_node' (a cluster file "
                                  "without 'base' must give it)");
    if (FilePerNode < 1 || FilePerNode > MaxGpusPerNode)
      return R.error("gpus_per_node", "expected 1 to " + Twine(MaxGpusPerNode));
    C.Device.DefaultGpusPerNode = FilePerNode;
  }
  // Name each size as the user gave it: an option, or a key of the file.
  SizeNames Names{"", "--gpus", "--gpus-per-node"};
  if (NumGpus <= 0) {
    if (!R.seen("num_gpus"))
      return makeError(FileName + ": missing 'num_gpus' (or give --gpus)");
    NumGpus = FileGpus;
    Names.Gpus = "'num_gpus'";
  }
  if (GpusPerNode <= 0 && R.seen("gpus_per_node")) {
    GpusPerNode = FilePerNode;
    Names.PerNode = "'gpus_per_node'";
  }
  if (Names.Gpus[0] == '\'' || Names.PerNode[0] == '\'')
    Names.Prefix = (FileName + ": ").str();
  if (Error E = setSizes(C, NumGpus, GpusPerNode, Names))
    return E;
  copyLinks(C);
  return C;
}

Expected<Cluster> autopar::loadClusterFile(StringRef Path, int64_t NumGpus,
                                           int64_t GpusPerNode) {
  auto Buffer = llvm::MemoryBuffer::getFile(Path, /*IsText=*/true);
  if (!Buffer)
    return makeError("cannot read cluster file '" + Path +
                     "': " + Buffer.getError().message());
  return parseClusterJSON((*Buffer)->getBuffer(), Path,
                          llvm::sys::path::parent_path(Path), NumGpus,
                          GpusPerNode);
}

llvm::json::Value autopar::clusterToJSON(const Cluster &C) {
  const DeviceSpec &D = C.Device;
  llvm::json::Object Flops;
  for (unsigned P = 0; P < NumPrecisions; ++P)
    Flops[getPrecisionName(static_cast<Precision>(P))] =
        D.PeakFlopsByPrecision[P];
  auto Link = [](const LinkLevel &L) {
    return llvm::json::Object{{"bytes_per_s", L.BytesPerSec},
                              {"latency_s", L.LatencySec}};
  };
  llvm::json::Object O{
      {"name", D.Name},
      {"num_gpus", int64_t(C.NumGpus)},
      {"gpus_per_node", int64_t(C.GpusPerNode)},
      {"memory_bytes", int64_t(D.MemoryBytes)},
      {"peak_flops", std::move(Flops)},
      {"hbm_bytes_per_s", D.HbmBytesPerSec},
      {"hbm_efficiency", D.HbmEfficiency},
      {"compute_units", int64_t(D.ComputeUnits)},
      {"gemm_efficiency", D.GemmEfficiency},
      {"gemm_efficiency_max", D.GemmEfficiencyMax},
      {"sustained_fraction", D.SustainedFraction},
      {"kernel_launch_s", D.KernelLaunchSec},
      {"collective_latency_s", C.CollectiveLatencySec},
      {"collective_protocols", getCollectiveProtocolsName(D.Protocols)},
      {"links", llvm::json::Object{{"intra_node", Link(C.IntraNode)},
                                   {"inter_node", Link(C.InterNode)},
                                   {"host", Link(C.HostLink)},
                                   {"nvme", Link(C.Nvme)}}}};
  if (D.PeakInt8OpsPerSec > 0)
    O["peak_int8_ops"] = D.PeakInt8OpsPerSec;
  if (D.Calibration)
    O["gemm_calibration"] = calibrationToJSON(*D.Calibration);
  return O;
}
