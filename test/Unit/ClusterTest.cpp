//===- ClusterTest.cpp - The device catalog, makeCluster, cluster files ---===//

#include "cost/Cluster.h"
#include "cost/GemmEfficiency.h"

#include "llvm/ADT/SmallString.h"
#include "llvm/Support/FileSystem.h"
#include "llvm/Support/Path.h"
#include "llvm/Support/raw_ostream.h"

#include "gtest/gtest.h"

#include <set>

using namespace autopar;

namespace {

const DeviceSpec &device(llvm::StringRef Name) {
  const DeviceSpec *D = lookupDevice(Name);
  EXPECT_TRUE(D) << Name.str();
  return *D;
}

/// The error text of an Expected that must have failed.
template <typename T> std::string errorOf(llvm::Expected<T> E) {
  if (E) {
    ADD_FAILURE() << "expected an error";
    return "";
  }
  return llvm::toString(E.takeError());
}

std::string print(const llvm::json::Value &V) {
  std::string S;
  llvm::raw_string_ostream OS(S);
  OS << V;
  return OS.str();
}

/// A scratch directory, removed with its files at the end of the test.
class TempDir {
public:
  TempDir() {
    EXPECT_FALSE(llvm::sys::fs::createUniqueDirectory("autopar-cluster", Dir));
  }
  ~TempDir() { llvm::sys::fs::remove_directories(Dir); }
  std::string write(llvm::StringRef Name, llvm::StringRef Text) {
    llvm::SmallString<256> Path(Dir);
    llvm::sys::path::append(Path, Name);
    std::error_code EC;
    llvm::raw_fd_ostream OS(Path, EC);
    EXPECT_FALSE(EC);
    OS << Text;
    return std::string(Path);
  }

private:
  llvm::SmallString<256> Dir;
};

TEST(ClusterTest, CatalogHasTheDatasheetFigures) {
  const DeviceSpec &A40 = device("a100-40gb"), &A80 = device("a100-80gb");
  for (const DeviceSpec *A : {&A40, &A80}) {
    EXPECT_EQ(A->PeakFlops(Precision::BF16), 312e12);
    EXPECT_EQ(A->PeakFlops(Precision::FP16), 312e12);
    EXPECT_EQ(A->ComputeUnits, 108u);
    EXPECT_EQ(A->DefaultGpusPerNode, 8u);
    // NVLink 3: 600 GB/s counts both directions; the model uses one
    // direction's achievable rate.
    EXPECT_LE(A->IntraNode.BytesPerSec, 300e9);
    EXPECT_GE(A->IntraNode.BytesPerSec, 200e9);
    // One 200 Gb/s HDR NIC per GPU.
    EXPECT_LE(A->InterNode.BytesPerSec, 25e9);
    EXPECT_GE(A->InterNode.BytesPerSec, 20e9);
  }
  // Dense int8: twice the 16-bit rate on both generations.
  EXPECT_EQ(A40.integerProductPeak(), 624e12);
  EXPECT_EQ(A80.integerProductPeak(), 624e12);
  EXPECT_EQ(A40.HbmBytesPerSec, 1555e9);
  EXPECT_EQ(A80.HbmBytesPerSec, 2039e9);
  EXPECT_EQ(A40.MemoryBytes * 2, A80.MemoryBytes);

  const DeviceSpec &H100 = device("h100"), &H200 = device("h200");
  EXPECT_EQ(H100.PeakFlops(Precision::BF16), 989e12);
  EXPECT_EQ(H100.HbmBytesPerSec, 3.35e12);
  EXPECT_EQ(H100.integerProductPeak(), 1979e12);
  EXPECT_EQ(H100.ComputeUnits, 132u);
  EXPECT_LE(H100.IntraNode.BytesPerSec, 450e9);
  EXPECT_LE(H100.InterNode.BytesPerSec, 50e9);
  EXPECT_GE(H100.InterNode.BytesPerSec, 40e9);
  // H200: H100's compute and links, 141 GB at 4.8 TB/s.
  for (unsigned P = 0; P < NumPrecisions; ++P)
    EXPECT_EQ(H200.PeakFlopsByPrecision[P], H100.PeakFlopsByPrecision[P]);
  EXPECT_EQ(H200.HbmBytesPerSec, 4.8e12);
  EXPECT_GT(H200.MemoryBytes, 141e9);
  EXPECT_LT(H200.MemoryBytes, 152e9);
}

TEST(ClusterTest, EveryDeviceIsComplete) {
  std::set<std::string> Names;
  for (const DeviceSpec &D : getDeviceCatalog()) {
    SCOPED_TRACE(D.Name);
    EXPECT_TRUE(Names.insert(D.Name).second);
    EXPECT_GT(D.MemoryBytes, 0u);
    for (double F : D.PeakFlopsByPrecision)
      EXPECT_GT(F, 0);
    EXPECT_GT(D.PeakInt8OpsPerSec, 0);
    EXPECT_GT(D.HbmBytesPerSec, 0);
    EXPECT_GT(D.HbmEfficiency, 0);
    EXPECT_LE(D.HbmEfficiency, 1);
    EXPECT_GT(D.GemmEfficiency, 0);
    EXPECT_LE(D.GemmEfficiency, 1);
    EXPECT_GE(D.ComputeUnits, 1u);
    EXPECT_GE(D.DefaultGpusPerNode, 1u);
    for (const LinkLevel *L :
         {&D.IntraNode, &D.InterNode, &D.HostLink, &D.Nvme}) {
      EXPECT_GT(L->BytesPerSec, 0);
      EXPECT_GE(L->LatencySec, 0);
    }
    // The network is slower than NVLink / shared memory.
    EXPECT_LT(D.InterNode.BytesPerSec, D.IntraNode.BytesPerSec);
  }
  EXPECT_EQ(Names, (std::set<std::string>{"a100-40gb", "a100-80gb", "h100",
                                          "h200", "cpu"}));
  // The cpu device is measured, with a measured GEMM curve.
  EXPECT_TRUE(device("cpu").Calibration);
  EXPECT_EQ(lookupDevice("A100-80GB"), &device("a100-80gb"));
  EXPECT_EQ(lookupDevice("v100"), nullptr);
}

TEST(ClusterTest, MakeCluster) {
  auto C = makeCluster("a100-80gb", 1024, 8);
  ASSERT_TRUE(bool(C)) << llvm::toString(C.takeError());
  EXPECT_EQ(C->NumGpus, 1024u);
  EXPECT_EQ(C->GpusPerNode, 8u);
  EXPECT_EQ(C->numNodes(), 128u);
  EXPECT_EQ(C->IntraNode.BytesPerSec, C->Device.IntraNode.BytesPerSec);
  EXPECT_EQ(C->nvmeBytesPerSecPerGpu(), C->Nvme.BytesPerSec / 8);

  // 0: the device's default node size.
  auto D = makeCluster("h100", 64, 0);
  ASSERT_TRUE(bool(D));
  EXPECT_EQ(D->GpusPerNode, 8u);
  EXPECT_EQ(D->numNodes(), 8u);

  // Fewer GPUs than a node holds: one partial node.
  auto P = makeCluster("h200", 4, 8);
  ASSERT_TRUE(bool(P));
  EXPECT_EQ(P->GpusPerNode, 4u);
  EXPECT_EQ(P->numNodes(), 1u);
  auto One = makeCluster("cpu", 1, 0);
  ASSERT_TRUE(bool(One));
  EXPECT_EQ(One->numNodes(), 1u);
}

TEST(ClusterTest, MakeClusterErrorsSayWhatIsValid) {
  std::string E = errorOf(makeCluster("v100", 8, 8));
  EXPECT_NE(E.find("unknown --gpu 'v100'"), std::string::npos) << E;
  EXPECT_NE(E.find("a100-40gb, a100-80gb, h100, h200, cpu"), std::string::npos)
      << E;

  EXPECT_EQ(errorOf(makeCluster("a100-80gb", 1001, 8)),
            "--gpus 1001 is not a multiple of --gpus-per-node 8; the nearest "
            "valid counts are 1000 and 1008, and any count up to 8 (one "
            "partial node)");
  EXPECT_EQ(
      errorOf(makeCluster("a100-80gb", 1000, 16))
          .find("--gpus 1000 is not a multiple of --gpus-per-node 16; the "
                "nearest valid counts are 992 and 1008"),
      0u);
  EXPECT_EQ(errorOf(makeCluster("h100", 12, 0))
                .find("--gpus 12 is not a multiple of --gpus-per-node 8"),
            0u);
  EXPECT_EQ(errorOf(makeCluster("h100", 0, 8)), "--gpus 0 must be at least 1");
  EXPECT_EQ(errorOf(makeCluster("h100", -4, 8)),
            "--gpus -4 must be at least 1");
  EXPECT_EQ(errorOf(makeCluster("h100", 2000000, 8)),
            "--gpus 2000000 is more than the 1048576 GPUs autopar plans for");
  EXPECT_EQ(errorOf(makeCluster("h100", 16, -1)),
            "--gpus-per-node -1 must be at least 1, or 0 for the device's "
            "default (8 for h100)");
  EXPECT_EQ(errorOf(makeCluster("h100", 4096, 4096)),
            "--gpus-per-node 4096 is more than 1024");
  EXPECT_TRUE(bool(makeCluster("h100", 1 << 20, 8)));
}

TEST(ClusterTest, FileInheritsFromBase) {
  TempDir Dir;
  std::string Path = Dir.write("c.json", R"({
    "base": "a100-80gb",
    "name": "a100-roce",
    "num_gpus": 64,
    "links": {"inter_node": {"bytes_per_s": 10e9}},
    "hbm_efficiency": 0.8
  })");
  auto C = loadClusterFile(Path);
  ASSERT_TRUE(bool(C)) << llvm::toString(C.takeError());
  const DeviceSpec &Base = device("a100-80gb");
  EXPECT_EQ(C->Device.Name, "a100-roce");
  EXPECT_EQ(C->NumGpus, 64u);
  EXPECT_EQ(C->GpusPerNode, 8u);
  EXPECT_EQ(C->InterNode.BytesPerSec, 10e9);
  EXPECT_EQ(C->InterNode.LatencySec, Base.InterNode.LatencySec);
  EXPECT_EQ(C->IntraNode.BytesPerSec, Base.IntraNode.BytesPerSec);
  EXPECT_EQ(C->Device.HbmEfficiency, 0.8);
  EXPECT_EQ(C->Device.PeakFlops(Precision::BF16), 312e12);

  // The command line's sizes win; their errors name the option.
  auto Big = loadClusterFile(Path, 256, 4);
  ASSERT_TRUE(bool(Big));
  EXPECT_EQ(Big->numNodes(), 64u);
  EXPECT_EQ(errorOf(loadClusterFile(Path, 100, 0))
                .find("--gpus 100 is not a multiple of --gpus-per-node 8;"),
            0u);
}

TEST(ClusterTest, JSONRoundTripsAndIsDeterministic) {
  for (const DeviceSpec &D : getDeviceCatalog()) {
    SCOPED_TRACE(D.Name);
    auto C = makeCluster(D.Name, 16, 0);
    ASSERT_TRUE(bool(C));
    llvm::json::Value V = clusterToJSON(*C);
    std::string Text = print(V);
    EXPECT_EQ(Text, print(clusterToJSON(*C)));
    // Sorted keys: the first is collective_latency_s.
    EXPECT_EQ(Text.find("{\"collective_latency_s\":"), 0u) << Text;
    auto Back = parseClusterJSON(Text, "round-trip.json");
    ASSERT_TRUE(bool(Back)) << llvm::toString(Back.takeError());
    EXPECT_EQ(print(clusterToJSON(*Back)), Text);
    EXPECT_EQ(Back->Device.Name, D.Name);
    EXPECT_EQ(Back->numNodes(), C->numNodes());
    EXPECT_EQ(bool(Back->Device.Calibration), bool(D.Calibration));
    EXPECT_EQ(Back->Device.Protocols, D.Protocols);
  }
}

TEST(ClusterTest, CollectiveProtocols) {
  // GPUs talk NCCL; the CPU runtime's MPI has one protocol.
  EXPECT_EQ(lookupDevice("a100-80gb")->Protocols, CollectiveProtocols::Nccl);
  EXPECT_EQ(lookupDevice("cpu")->Protocols, CollectiveProtocols::Single);
  auto C = parseClusterJSON(
      R"({"base": "h100", "num_gpus": 8, "collective_protocols": "single"})",
      "one.json");
  ASSERT_TRUE(bool(C)) << llvm::toString(C.takeError());
  EXPECT_EQ(C->Device.Protocols, CollectiveProtocols::Single);
  // A file without the key keeps its base's.
  auto Cpu = parseClusterJSON(R"({"base": "cpu", "num_gpus": 2})", "c.json");
  ASSERT_TRUE(bool(Cpu)) << llvm::toString(Cpu.takeError());
  EXPECT_EQ(Cpu->Device.Protocols, CollectiveProtocols::Single);
}

TEST(ClusterTest, FileErrorsNameTheFileAndKey) {
  auto Err = [](llvm::StringRef Text) {
    return errorOf(parseClusterJSON(Text, "my.json"));
  };
  EXPECT_EQ(Err(R"({"base": "h100", "num_gpus": 8, "bandwidth": 1})"),
            "my.json: 'bandwidth': unknown key; valid keys: base, name, "
            "num_gpus, gpus_per_node, memory_bytes, peak_flops, "
            "peak_int8_ops, hbm_bytes_per_s, hbm_efficiency, compute_units, "
            "gemm_efficiency, "
            "gemm_efficiency_max, sustained_fraction, kernel_launch_s, "
            "collective_latency_s, "
            "collective_protocols, "
            "links, gemm_calibration");
  EXPECT_EQ(Err(R"({"base": "h100", "collective_protocols": "ring"})"),
            "my.json: 'collective_protocols': expected \"nccl\" (NCCL's LL, "
            "LL128 and Simple) or \"single\" (the links' figures, e.g. MPI)");
  EXPECT_EQ(Err(R"({"base": "h100", "num_gpus": 8,
              "links": {"intra_node": {"bandwidth": 1}}})"),
            "my.json: 'links.intra_node.bandwidth': unknown key; valid keys: "
            "bytes_per_s, latency_s");
  EXPECT_EQ(Err(R"({"base": "h100", "num_gpus": 8, "links": {"pcie": {}}})"),
            "my.json: 'links.pcie': unknown key; valid keys: intra_node, "
            "inter_node, host, nvme");
  EXPECT_EQ(Err(R"({"base": "h100", "num_gpus": 8,
                    "hbm_bytes_per_s": "3.35e12"})"),
            "my.json: 'hbm_bytes_per_s': expected a positive number");
  EXPECT_EQ(Err(R"({"base": "h100", "num_gpus": 8,
                    "peak_flops": {"bf16": -1}})"),
            "my.json: 'peak_flops.bf16': expected a positive number");
  EXPECT_EQ(Err(R"({"base": "h100", "num_gpus": 8, "gemm_efficiency": 1.5})"),
            "my.json: 'gemm_efficiency': expected a number in (0, 1]");
  EXPECT_EQ(Err(R"({"base": "h100", "num_gpus": 8, "sustained_fraction": 0})"),
            "my.json: 'sustained_fraction': expected a number in (0, 1]");
  EXPECT_EQ(Err(R"({"base": "h100", "num_gpus": 8, "gemm_efficiency_max": 2})"),
            "my.json: 'gemm_efficiency_max': expected a number in (0, 1]");
  EXPECT_EQ(Err(R"({"base": "h100", "num_gpus": 8, "links": []})"),
            "my.json: 'links': expected an object");
  EXPECT_EQ(Err(R"({"base": "h100", "num_gpus": "8"})"),
            "my.json: 'num_gpus': expected an integer");
  EXPECT_EQ(Err(R"({"base": "tpu", "num_gpus": 8})")
                .find("my.json: 'base': unknown device 'tpu'; valid devices: "),
            0u);
  EXPECT_EQ(Err(R"({"base": "h100"})"),
            "my.json: missing 'num_gpus' (or give --gpus)");
  EXPECT_EQ(Err(R"({"base": "h100", "num_gpus": 12})"),
            "my.json: 'num_gpus' 12 is not a multiple of --gpus-per-node 8; "
            "the nearest valid counts are 8 and 16, and any count up to 8 "
            "(one partial node)");
  EXPECT_EQ(Err(R"({"base": "h100", "num_gpus": 12, "gpus_per_node": 5})"),
            "my.json: 'num_gpus' 12 is not a multiple of 'gpus_per_node' 5; "
            "the nearest valid counts are 10 and 15, and any count up to 5 "
            "(one partial node)");
  EXPECT_EQ(Err(R"({"name": "x", "num_gpus": 8, "gpus_per_node": 8})"),
            "my.json: missing 'memory_bytes' (a cluster file without 'base' "
            "must give it)");
  EXPECT_EQ(Err("[1, 2]"), "my.json: expected a JSON object");
  EXPECT_EQ(Err("{").find("my.json: invalid JSON: "), 0u);

  std::string Missing = errorOf(loadClusterFile("/nonexistent/c.json"));
  EXPECT_EQ(Missing.find("cannot read cluster file '/nonexistent/c.json'"), 0u)
      << Missing;
}

TEST(ClusterTest, FileWithoutBase) {
  // Everything given: a made-up device.
  const char *Text = R"({
    "name": "toy", "num_gpus": 4, "gpus_per_node": 2,
    "memory_bytes": 1000000000,
    "peak_flops": {"fp32": 1e12, "tf32": 2e12, "bf16": 4e12, "fp16": 4e12},
    "hbm_bytes_per_s": 1e11, "hbm_efficiency": 0.9,
    "compute_units": 10, "gemm_efficiency": 0.8,
    "links": {
      "intra_node": {"bytes_per_s": 5e10, "latency_s": 1e-6},
      "inter_node": {"bytes_per_s": 1e10, "latency_s": 5e-6},
      "host": {"bytes_per_s": 1e10, "latency_s": 1e-5},
      "nvme": {"bytes_per_s": 1e9, "latency_s": 1e-4}
    }
  })";
  auto C = parseClusterJSON(Text, "toy.json");
  ASSERT_TRUE(bool(C)) << llvm::toString(C.takeError());
  EXPECT_EQ(C->Device.Name, "toy");
  EXPECT_EQ(C->numNodes(), 2u);
  EXPECT_EQ(C->Device.PeakFlops(Precision::TF32), 2e12);
  EXPECT_EQ(C->Device.ComputeUnits, 10u);
  EXPECT_EQ(C->Nvme.LatencySec, 1e-4);
  EXPECT_EQ(C->CollectiveLatencySec, 0);
  EXPECT_FALSE(C->Device.Calibration);
  // No int8 figure: integer products run at the fp16 peak, and the file
  // written back leaves the key out.
  EXPECT_EQ(C->Device.integerProductPeak(), 4e12);
  std::string Back = print(clusterToJSON(*C));
  EXPECT_EQ(Back.find("peak_int8_ops"), std::string::npos);
  auto Int8 = parseClusterJSON(
      R"({"base": "h100", "num_gpus": 8, "peak_int8_ops": 1.5e15})", "i.json");
  ASSERT_TRUE(bool(Int8)) << llvm::toString(Int8.takeError());
  EXPECT_EQ(Int8->Device.integerProductPeak(), 1.5e15);
}

TEST(ClusterTest, FileCalibration) {
  TempDir Dir;
  Dir.write("cal.json", R"({"device": "a100-80gb", "curves": {"bf16": {
    "m": [1024], "n": [1024], "k": [1024], "efficiency": [[[0.5]]]}}})");
  std::string Path = Dir.write("c.json", R"({"base": "a100-80gb", "num_gpus": 8,
                    "gemm_calibration": "cal.json"})");
  auto C = loadClusterFile(Path);
  ASSERT_TRUE(bool(C)) << llvm::toString(C.takeError());
  EXPECT_DOUBLE_EQ(gemmEfficiency(C->Device, Precision::BF16, 4096, 4096, 4096),
                   0.5);

  // Inline, as clusterToJSON writes it.
  auto Inline = parseClusterJSON(
      R"({"base": "h100", "num_gpus": 8, "gemm_calibration": {"curves":
          {"fp16": {"m": [64], "n": [64], "k": [64],
                    "efficiency": [[[0.25]]]}}}})",
      "i.json");
  ASSERT_TRUE(bool(Inline)) << llvm::toString(Inline.takeError());
  EXPECT_DOUBLE_EQ(gemmEfficiency(Inline->Device, Precision::FP16, 64, 64, 64),
                   0.25);

  std::string Wrong = Dir.write("w.json", R"({"base": "h100", "num_gpus": 8,
                    "gemm_calibration": "cal.json"})");
  std::string E = errorOf(loadClusterFile(Wrong));
  EXPECT_NE(E.find("'gemm_calibration'"), std::string::npos) << E;
  EXPECT_NE(E.find("the calibration is for 'a100-80gb', not 'h100'"),
            std::string::npos)
      << E;
  std::string Absent = Dir.write("a.json", R"({"base": "h100", "num_gpus": 8,
                    "gemm_calibration": "none.json"})");
  E = errorOf(loadClusterFile(Absent));
  EXPECT_NE(E.find("cannot read calibration file"), std::string::npos) << E;
  EXPECT_NE(E.find("none.json"), std::string::npos) << E;
}

} // namespace
