//===- GemmEfficiencyTest.cpp - The GEMM efficiency model -----------------===//

#include "cost/GemmEfficiency.h"
#include "cost/Cluster.h"

#include "llvm/ADT/SmallString.h"
#include "llvm/Support/FileSystem.h"
#include "llvm/Support/raw_ostream.h"

#include "gtest/gtest.h"

#include <cmath>

using namespace autopar;

namespace {

const DeviceSpec &device(llvm::StringRef Name) {
  const DeviceSpec *D = lookupDevice(Name);
  EXPECT_TRUE(D) << Name.str();
  return *D;
}

double eff(const DeviceSpec &D, int64_t M, int64_t N, int64_t K,
           int64_t Batch = 1) {
  return gemmEfficiency(D, Precision::BF16, M, N, K, Batch);
}

TEST(GemmEfficiencyTest, LargeProductsApproachTheAchievableFraction) {
  for (const char *Name : {"a100-40gb", "a100-80gb", "h100", "h200"}) {
    const DeviceSpec &D = device(Name);
    double Big = eff(D, 16384, 16384, 16384);
    EXPECT_GT(Big, 0.95 * D.GemmEfficiencyMax) << Name;
    EXPECT_LE(Big, D.GemmEfficiency) << Name;
    for (int64_t M : {1, 100, 3000, 50000})
      for (int64_t K : {1, 64, 5000})
        EXPECT_LE(eff(D, M, 8192, K), D.GemmEfficiency) << Name;
  }
}

TEST(GemmEfficiencyTest, ReproducesMeasuredMaximumAchievableMatmulFlops) {
  // Bekman's MAMF table (bf16): A100 SXM 86.9% at 1024x10240x5120, H100
  // SXM 80.3% at 2048x2048x13312, "H200 is the same".
  EXPECT_NEAR(eff(device("a100-80gb"), 1024, 10240, 5120), 0.869, 0.005);
  EXPECT_NEAR(eff(device("h100"), 2048, 2048, 13312), 0.803, 0.005);
  EXPECT_NEAR(eff(device("h200"), 2048, 2048, 13312), 0.803, 0.005);
}

TEST(GemmEfficiencyTest, NoShapeBeatsTheMeasuredMaximum) {
  // MAMF is the best of a sweep over shapes: larger, better-tiled shapes
  // than the one that reached it, which the tile and K terms alone would
  // put above it, stop at it.
  for (const char *Name : {"a100-80gb", "h100"}) {
    const DeviceSpec &D = device(Name);
    EXPECT_LT(D.GemmEfficiencyMax, D.GemmEfficiency) << Name;
    for (int64_t M : {1024, 4096, 16384, 65536})
      for (int64_t N : {1024, 4096, 12288, 32768})
        for (int64_t K : {1024, 8192, 25600})
          EXPECT_LE(eff(D, M, N, K), D.GemmEfficiencyMax) << Name;
  }
  // Megatron's tp=8 MLP product of a 39B GPT: uncapped it would reach
  // 0.891 of peak on A100.
  EXPECT_DOUBLE_EQ(eff(device("a100-80gb"), 16384, 4096, 8192), 0.869);
  // A cluster file that sets its own asymptote is not held to its base's
  // measured maximum unless it gives one.
  auto Own = parseClusterJSON(
      R"({"base": "a100-80gb", "num_gpus": 8, "gemm_efficiency": 0.95})",
      "own.json");
  ASSERT_TRUE(bool(Own)) << llvm::toString(Own.takeError());
  EXPECT_GT(eff(Own->Device, 16384, 4096, 8192), 0.9);
  auto Capped = parseClusterJSON(R"({"base": "a100-80gb", "num_gpus": 8,
      "gemm_efficiency": 0.95, "gemm_efficiency_max": 0.8})",
                                 "capped.json");
  ASSERT_TRUE(bool(Capped)) << llvm::toString(Capped.takeError());
  EXPECT_DOUBLE_EQ(eff(Capped->Device, 16384, 4096, 8192), 0.8);
}

TEST(GemmEfficiencyTest, SmallAndSkinnyProductsDoNotReachPeak) {
  const DeviceSpec &D = device("a100-80gb");
  EXPECT_LT(eff(D, 128, 128, 128), 0.02);
  EXPECT_LT(eff(D, 512, 512, 512), 0.3);
  EXPECT_LT(eff(D, 1024, 1024, 1024), 0.5);
  // Matrix-vector and decode-like products are memory bound.
  EXPECT_LT(eff(D, 1, 8192, 8192), 0.01);
  EXPECT_LT(eff(D, 16, 8192, 8192), 0.1);
  // ...and faster memory helps them: H200 over H100.
  EXPECT_GT(eff(device("h200"), 16, 8192, 8192),
            1.3 * eff(device("h100"), 16, 8192, 8192));
}

TEST(GemmEfficiencyTest, WaveQuantizationFollowsTheSmCount) {
  // 3072x1152 is 12x9 = 108 tiles of 256x128: one full wave on A100's 108
  // SMs. One more column of tiles needs a second, mostly idle wave.
  const DeviceSpec &A100 = device("a100-80gb"), &H100 = device("h100");
  double Full = eff(A100, 3072, 1152, 4096);
  EXPECT_LT(eff(A100, 3072, 1280, 4096), 0.85 * Full);
  // On H100's 132 SMs the full wave is 12x11 tiles.
  double FullH = eff(H100, 3072, 1408, 4096);
  EXPECT_LT(eff(H100, 3072, 1536, 4096), 0.85 * FullH);
  // The shape that fills H100 leaves A100 a partial wave, and the reverse.
  EXPECT_GT(FullH / H100.GemmEfficiency,
            1.05 * eff(A100, 3072, 1408, 4096) / A100.GemmEfficiency);
  EXPECT_GT(Full / A100.GemmEfficiency,
            1.05 * eff(H100, 3072, 1152, 4096) / H100.GemmEfficiency);
}

TEST(GemmEfficiencyTest, SmallKRollsOff) {
  const DeviceSpec &D = device("h100");
  EXPECT_LT(eff(D, 8192, 8192, 64), 0.5 * eff(D, 8192, 8192, 8192));
  // It rises with K until the measured maximum holds it.
  double Last = 0;
  for (int64_t K = 16; K <= 65536; K *= 2) {
    double E = eff(D, 8192, 8192, K);
    if (Last < D.GemmEfficiencyMax)
      EXPECT_GT(E, Last) << K;
    else
      EXPECT_EQ(E, D.GemmEfficiencyMax) << K;
    Last = E;
  }
}

TEST(GemmEfficiencyTest, MonotonicEnough) {
  // Growing a product never loses more than wave quantization can take
  // (15% here), and gains a lot overall.
  for (const char *Name : {"a100-80gb", "h100"}) {
    const DeviceSpec &D = device(Name);
    auto Sweep = [&](auto Shape, double Gain) {
      double First = Shape(32), Best = 0;
      for (int64_t X = 32; X <= 32768; X = X * 3 / 2) {
        double E = Shape(X);
        EXPECT_GE(E, 0.85 * Best) << Name << " " << X;
        Best = std::max(Best, E);
      }
      EXPECT_GT(Best, Gain * First) << Name;
    };
    Sweep([&](int64_t X) { return eff(D, X, X, X); }, 100);
    Sweep([&](int64_t X) { return eff(D, X, 8192, 8192); }, 3);
    Sweep([&](int64_t X) { return eff(D, 8192, X, 8192); }, 3);
  }
}

TEST(GemmEfficiencyTest, BatchesFillTheDevice) {
  const DeviceSpec &D = device("a100-80gb");
  // One 1024^3 product fills a third of a wave of 256x128 tiles; 16 of
  // them fill five waves.
  EXPECT_GT(eff(D, 1024, 1024, 1024, 16), 1.5 * eff(D, 1024, 1024, 1024));
  EXPECT_GT(eff(D, 128, 128, 128, 512), 5 * eff(D, 128, 128, 128));
}

TEST(GemmEfficiencyTest, SecondsAndPrecisions) {
  const DeviceSpec &D = device("a100-80gb");
  EXPECT_EQ(gemmEfficiency(D, Precision::BF16, 0, 8, 8), 1);
  EXPECT_EQ(gemmSeconds(D, Precision::BF16, 8, 8, 0), 0);
  double Flops = 2.0 * 8192 * 8192 * 8192;
  for (Precision P : {Precision::FP32, Precision::TF32, Precision::BF16}) {
    double T = gemmSeconds(D, P, 8192, 8192, 8192);
    EXPECT_NEAR(T * D.PeakFlops(P) * gemmEfficiency(D, P, 8192, 8192, 8192),
                Flops, Flops * 1e-12);
  }
  // FP32 runs without tensor cores: 16x slower than bf16 when large.
  EXPECT_GT(gemmSeconds(D, Precision::FP32, 8192, 8192, 8192),
            10 * gemmSeconds(D, Precision::BF16, 8192, 8192, 8192));
}

/// A calibration file in a scratch directory.
class CalibrationFile {
public:
  explicit CalibrationFile(llvm::StringRef Text) {
    EXPECT_FALSE(
        llvm::sys::fs::createTemporaryFile("autopar-cal", "json", Path));
    std::error_code EC;
    llvm::raw_fd_ostream OS(Path, EC);
    OS << Text;
  }
  ~CalibrationFile() { llvm::sys::fs::remove(Path); }
  std::string path() const { return std::string(Path); }

private:
  llvm::SmallString<128> Path;
};

const char *const Table = R"({
  "device": "a100-80gb",
  "source": "unit test",
  "curves": {"bf16": {
    "m": [256, 1024], "n": [256, 1024], "k": [256, 4096],
    "efficiency": [[[0.1, 0.2], [0.3, 0.4]], [[0.5, 0.6], [0.7, 0.8]]]
  }}
})";

TEST(GemmEfficiencyTest, CalibrationReplacesTheCurve) {
  DeviceSpec D = device("a100-80gb");
  CalibrationFile F(Table);
  ASSERT_FALSE(bool(loadCalibration(F.path(), D)));
  ASSERT_TRUE(D.Calibration);
  EXPECT_EQ(D.Calibration->Source, "unit test");
  // Grid points.
  EXPECT_DOUBLE_EQ(eff(D, 256, 256, 256), 0.1);
  EXPECT_DOUBLE_EQ(eff(D, 1024, 1024, 4096), 0.8);
  EXPECT_DOUBLE_EQ(eff(D, 1024, 256, 4096), 0.6);
  // Halfway in log space (512 between 256 and 1024; 1024 between 256 and
  // 4096) is the mean.
  EXPECT_DOUBLE_EQ(eff(D, 512, 256, 256), 0.3);
  EXPECT_DOUBLE_EQ(eff(D, 256, 256, 1024), 0.15);
  EXPECT_DOUBLE_EQ(eff(D, 512, 512, 1024),
                   (0.1 + 0.2 + 0.3 + 0.4 + 0.5 + 0.6 + 0.7 + 0.8) / 8);
  // Above the grid: the edge; below: scaled down with the size.
  EXPECT_DOUBLE_EQ(eff(D, 65536, 65536, 65536), 0.8);
  EXPECT_DOUBLE_EQ(eff(D, 128, 256, 256), 0.05);
  // A batch counts as rows.
  EXPECT_DOUBLE_EQ(eff(D, 256, 256, 256, 4), 0.5);
  // Other precisions keep the analytic model.
  EXPECT_DOUBLE_EQ(
      gemmEfficiency(D, Precision::FP16, 8192, 8192, 8192),
      gemmEfficiency(device("a100-80gb"), Precision::FP16, 8192, 8192, 8192));
  // A second file replaces only what it lists.
  CalibrationFile G(R"({"curves": {"fp16": {"m": [1], "n": [1], "k": [1],
                        "efficiency": [[[1]]]}}})");
  ASSERT_FALSE(bool(loadCalibration(G.path(), D)));
  EXPECT_DOUBLE_EQ(eff(D, 256, 256, 256), 0.1);
  EXPECT_DOUBLE_EQ(gemmEfficiency(D, Precision::FP16, 5, 5, 5), 1);
}

TEST(GemmEfficiencyTest, CalibrationRoundTripsThroughJSON) {
  DeviceSpec D = device("a100-80gb");
  CalibrationFile F(Table);
  ASSERT_FALSE(bool(loadCalibration(F.path(), D)));
  llvm::json::Value V = calibrationToJSON(*D.Calibration);
  auto Back = parseCalibration(V, "round-trip", "a100-80gb");
  ASSERT_TRUE(bool(Back)) << llvm::toString(Back.takeError());
  EXPECT_EQ(calibrationToJSON(**Back), V);
}

TEST(GemmEfficiencyTest, CalibrationErrorsNameTheFileAndKey) {
  auto Err = [](llvm::StringRef Text) {
    DeviceSpec D = device("a100-80gb");
    CalibrationFile F(Text);
    llvm::Error E = loadCalibration(F.path(), D);
    EXPECT_TRUE(bool(E));
    std::string Message = llvm::toString(std::move(E));
    // Every message starts with the file's name.
    EXPECT_EQ(Message.find(F.path() + ": "), 0u) << Message;
    return Message.substr(F.path().size() + 2);
  };
  EXPECT_EQ(Err(R"({"device": "h100", "curves": {}})"),
            "'device': the calibration is for 'h100', not 'a100-80gb'");
  EXPECT_EQ(Err(R"({"curves": {}, "shapes": []})"),
            "'shapes': unknown key; valid keys: device, source, curves");
  EXPECT_EQ(Err(R"({"curves": {"int8": {}}})"),
            "'curves.int8': unknown key; valid keys: fp32, tf32, bf16, fp16");
  EXPECT_EQ(Err(R"({"curves": {}})"),
            "'curves': expected an object with a curve per precision");
  EXPECT_EQ(Err(R"({"curves": {"bf16": {"m": [2, 1], "n": [1], "k": [1],
                    "efficiency": [[[1]]]}}})"),
            "'curves.bf16.m': sizes must increase strictly");
  EXPECT_EQ(Err(R"({"curves": {"bf16": {"m": [1], "n": ["1"], "k": [1],
                    "efficiency": [[[1]]]}}})"),
            "'curves.bf16.n': expected positive integer sizes");
  EXPECT_EQ(Err(R"({"curves": {"bf16": {"m": [1, 2], "n": [1], "k": [1],
                    "efficiency": [[[1]]]}}})"),
            "'curves.bf16.efficiency': expected 2 entries (one per grid "
            "point)");
  EXPECT_EQ(Err(R"({"curves": {"bf16": {"m": [1], "n": [1], "k": [1, 2],
                    "efficiency": [[[1]]]}}})"),
            "'curves.bf16.efficiency': expected 2 entries at [0][0] (one per "
            "grid point)");
  EXPECT_EQ(Err(R"({"curves": {"bf16": {"m": [1], "n": [1], "k": [1],
                    "efficiency": [[[1.5]]]}}})"),
            "'curves.bf16.efficiency': expected efficiencies in (0, 1]");
  EXPECT_EQ(Err(R"({"curves": {"bf16": {"m": [1], "n": [1], "k": [1]}}})"),
            "'curves.bf16.efficiency': expected 1 entries (one per grid "
            "point)");
  EXPECT_EQ(Err("{").find("invalid JSON: "), 0u);

  DeviceSpec D = device("h100");
  std::string Missing =
      llvm::toString(loadCalibration("/nonexistent/cal.json", D));
  EXPECT_EQ(
      Missing.find("cannot read calibration file '/nonexistent/cal.json'"), 0u)
      << Missing;
}

TEST(GemmEfficiencyTest, CpuCurveIsMeasured) {
  const DeviceSpec &D = device("cpu");
  ASSERT_TRUE(D.Calibration);
  for (Precision P : {Precision::FP32, Precision::BF16})
    EXPECT_TRUE(D.Calibration->Curves[static_cast<unsigned>(P)]);
  // The CPU runtime computes every precision in fp32.
  EXPECT_EQ(gemmEfficiency(D, Precision::BF16, 300, 200, 100),
            gemmEfficiency(D, Precision::FP32, 300, 200, 100));
  // Tiny products are far slower per FLOP than large ones.
  EXPECT_LT(gemmEfficiency(D, Precision::FP32, 16, 16, 16),
            0.2 * gemmEfficiency(D, Precision::FP32, 1024, 1024, 1024));
}

} // namespace
