//===- GemmEfficiency.cpp - Fraction of peak a matmul reaches -------------===//

#include "cost/GemmEfficiency.h"

#include "llvm/ADT/STLExtras.h"
#include "llvm/ADT/Twine.h"
#include "llvm/Support/MemoryBuffer.h"

#include <algorithm>
#include <cassert>
#include <cmath>

using namespace autopar;
using llvm::Error;
using llvm::StringRef;
using llvm::Twine;

//===----------------------------------------------------------------------===//
// The analytic model
//===----------------------------------------------------------------------===//

namespace {

/// An output tile of one thread block, and how efficiently an SM computes
/// it relative to the most efficient tile. NVIDIA's "Matrix Multiplication
/// Background User's Guide" (DU-09799-001, section 2.3) lists the cuBLAS
/// tiles from 256x128 (most data reuse, most efficient) to 64x64 (least);
/// the relative efficiencies are estimates that follow that order.
struct Tile {
  double Rows, Cols, Efficiency;
};
constexpr Tile GpuTiles[] = {{256, 128, 1.0}, {128, 256, 1.0}, {128, 128, 0.95},
                             {128, 64, 0.85}, {64, 128, 0.85}, {64, 64, 0.7}};

/// The K at which a tile spends as long in its prologue and epilogue
/// (filling a 4-stage pipeline of 32-deep K slices, writing the tile) as in
/// its main loop: efficiency scales by K / (K + KRolloff).
constexpr double KRolloff = 128;

/// The best tile's share of the SMs' time spent on useful output: tiles
/// run in waves of one tile per SM (the guide's section 3.2, "wave
/// quantization"), and partial tiles at the edges compute padding (section
/// 3.1, "tile quantization").
double tileOccupancy(double Units, double M, double N, double Batch) {
  double Best = 0;
  for (const Tile &T : GpuTiles) {
    double Count = std::ceil(M / T.Rows) * std::ceil(N / T.Cols) * Batch;
    double Waves = std::ceil(Count / Units);
    double Useful = M * N * Batch / (Waves * Units * T.Rows * T.Cols);
    Best = std::max(Best, Useful * T.Efficiency);
  }
  return Best;
}

/// The analytic model for a product at Peak whose operands and result take
/// Bytes (its roofline).
double analyticEfficiency(const DeviceSpec &D, double Peak, double Bytes,
                          double M, double N, double K, double Batch) {
  double Fraction = D.GemmEfficiency *
                    tileOccupancy(D.ComputeUnits, M, N, Batch) * K /
                    (K + KRolloff);
  double Flops = 2 * M * N * K * Batch;
  double Compute = Flops / (Peak * Fraction);
  double Memory = Bytes / D.achievableHbmBytesPerSec();
  double Seconds = std::max(Compute, Memory) + D.KernelLaunchSec;
  // No shape beats the measured maximum (which was timed launch included).
  return std::min(Flops / (Peak * Seconds), D.GemmEfficiencyMax);
}

double analyticEfficiency(const DeviceSpec &D, Precision P, double M, double N,
                          double K, double Batch) {
  // The roofline: every operand read once, the result written once.
  double Bytes = (M * K + K * N + M * N) * Batch * getPrecisionBytes(P);
  return analyticEfficiency(D, D.PeakFlops(P), Bytes, M, N, K, Batch);
}

} // namespace

//===----------------------------------------------------------------------===//
// Calibrated curves
//===----------------------------------------------------------------------===//

namespace {

/// Where X falls on an axis: the value is (1-T) V[I] + T V[I+1], times
/// Scale below the axis.
struct AxisPos {
  size_t I;
  double T;
  double Scale;
};

AxisPos locate(const std::vector<int64_t> &Axis, double X) {
  if (X <= Axis.front())
    return {0, 0, X / Axis.front()};
  if (X >= Axis.back())
    return {Axis.size() - 1, 0, 1};
  size_t I = std::upper_bound(Axis.begin(), Axis.end(), X) - Axis.begin() - 1;
  double Lo = std::log2(double(Axis[I])), Hi = std::log2(double(Axis[I + 1]));
  return {I, (std::log2(X) - Lo) / (Hi - Lo), 1};
}

} // namespace

double GemmCurve::lookup(double MV, double NV, double KV) const {
  AxisPos P[3] = {locate(M, MV), locate(N, NV), locate(K, KV)};
  size_t Sizes[3] = {M.size(), N.size(), K.size()};
  double Sum = 0;
  for (unsigned Corner = 0; Corner < 8; ++Corner) {
    double Weight = 1;
    size_t Index = 0;
    for (unsigned Axis = 0; Axis < 3; ++Axis) {
      bool Upper = Corner & (4u >> Axis);
      Weight *= Upper ? P[Axis].T : 1 - P[Axis].T;
      Index = Index * Sizes[Axis] + P[Axis].I + Upper;
    }
    if (Weight != 0)
      Sum += Weight * Efficiency[Index];
  }
  return Sum * P[0].Scale * P[1].Scale * P[2].Scale;
}

double autopar::gemmEfficiency(const DeviceSpec &D, Precision P, int64_t M,
                               int64_t N, int64_t K, int64_t Batch) {
  assert(M >= 0 && N >= 0 && K >= 0 && Batch >= 0 && "negative dimension");
  if (M == 0 || N == 0 || K == 0 || Batch == 0)
    return 1;
  if (D.Calibration) {
    if (const auto &Curve = D.Calibration->Curves[static_cast<unsigned>(P)])
      return Curve->lookup(double(M) * Batch, N, K);
  }
  return analyticEfficiency(D, P, M, N, K, Batch);
}

double autopar::gemmSeconds(const DeviceSpec &D, Precision P, int64_t M,
                            int64_t N, int64_t K, int64_t Batch) {
  if (M == 0 || N == 0 || K == 0 || Batch == 0)
    return 0;
  double Flops = 2.0 * M * N * K * Batch;
  return Flops / (D.PeakFlops(P) * gemmEfficiency(D, P, M, N, K, Batch));
}

double autopar::gemmSecondsAt(const DeviceSpec &D, Precision P, double Peak,
                              double Bytes, int64_t M, int64_t N, int64_t K,
                              int64_t Batch) {
  if (M == 0 || N == 0 || K == 0 || Batch == 0 || Peak <= 0)
    return 0;
  if (D.Calibration && D.Calibration->Curves[static_cast<unsigned>(P)])
    return gemmSeconds(D, P, M, N, K, Batch) * D.PeakFlops(P) / Peak;
  double Flops = 2.0 * M * N * K * Batch;
  return Flops / (Peak * analyticEfficiency(D, Peak, Bytes, M, N, K, Batch));
}

//===----------------------------------------------------------------------===//
// The calibration file
//===----------------------------------------------------------------------===//

namespace {

Error keyError(StringRef Where, const Twine &Key, const Twine &Message) {
  return llvm::createStringError(llvm::inconvertibleErrorCode(),
                                 Where + ": '" + Key + "': " + Message);
}

Error checkKeys(StringRef Where, const Twine &Prefix,
                const llvm::json::Object &O, llvm::ArrayRef<StringRef> Valid) {
  // Report the first unknown key in sorted order, for stable messages.
  std::vector<std::string> Keys;
  for (const auto &KV : O)
    Keys.push_back(KV.first.str());
  llvm::sort(Keys);
  for (const std::string &Key : Keys)
    if (!llvm::is_contained(Valid, Key))
      return keyError(Where, Prefix + Key,
                      "unknown key; valid keys: " + llvm::join(Valid, ", "));
  return Error::success();
}

llvm::Expected<std::vector<int64_t>>
parseAxis(StringRef Where, const Twine &Key, const llvm::json::Value *V) {
  const llvm::json::Array *A = V ? V->getAsArray() : nullptr;
  if (!A || A->empty())
    return keyError(Where, Key, "expected a non-empty array of sizes");
  std::vector<int64_t> Axis;
  for (const llvm::json::Value &E : *A) {
    std::optional<int64_t> X;
    if (auto I = E.getAsInteger())
      X = *I;
    if (!X || *X < 1)
      return keyError(Where, Key, "expected positive integer sizes");
    if (!Axis.empty() && *X <= Axis.back())
      return keyError(Where, Key, "sizes must increase strictly");
    Axis.push_back(*X);
  }
  return Axis;
}

llvm::Expected<GemmCurve> parseCurve(StringRef Where, StringRef Prec,
                                     const llvm::json::Value &V) {
  std::string Prefix = ("curves." + Prec + ".").str();
  const llvm::json::Object *O = V.getAsObject();
  if (!O)
    return keyError(Where, "curves." + Prec, "expected an object");
  if (Error E = checkKeys(Where, Prefix, *O, {"m", "n", "k", "efficiency"}))
    return E;
  GemmCurve C;
  std::vector<int64_t> *Axes[3] = {&C.M, &C.N, &C.K};
  const char *Names[3] = {"m", "n", "k"};
  for (unsigned I = 0; I < 3; ++I) {
    auto Axis = parseAxis(Where, Prefix + Names[I], O->get(Names[I]));
    if (!Axis)
      return Axis.takeError();
    *Axes[I] = std::move(*Axis);
  }
  // efficiency[i][j][l] for m[i], n[j], k[l].
  std::string Key = Prefix + "efficiency";
  auto Shape =
      [&](const llvm::json::Value *X, size_t Size,
          const Twine &At) -> llvm::Expected<const llvm::json::Array *> {
    const llvm::json::Array *A = X ? X->getAsArray() : nullptr;
    if (!A || A->size() != Size)
      return keyError(Where, Key,
                      "expected " + Twine(Size) + " entries" + At +
                          " (one per grid point)");
    return A;
  };
  auto Rows = Shape(O->get("efficiency"), C.M.size(), "");
  if (!Rows)
    return Rows.takeError();
  for (size_t I = 0; I < C.M.size(); ++I) {
    auto Cols = Shape(&(**Rows)[I], C.N.size(), " at [" + Twine(I) + "]");
    if (!Cols)
      return Cols.takeError();
    for (size_t J = 0; J < C.N.size(); ++J) {
      auto Ks = Shape(&(**Cols)[J], C.K.size(),
                      " at [" + Twine(I) + "][" + Twine(J) + "]");
      if (!Ks)
        return Ks.takeError();
      for (const llvm::json::Value &E : **Ks) {
        auto X = E.getAsNumber();
        if (!X || !(*X > 0 && *X <= 1))
          return keyError(Where, Key, "expected efficiencies in (0, 1]");
        C.Efficiency.push_back(*X);
      }
    }
  }
  return C;
}

} // namespace

llvm::Expected<std::shared_ptr<const GemmCalibration>>
autopar::parseCalibration(const llvm::json::Value &V, StringRef Where,
                          StringRef DeviceName) {
  const llvm::json::Object *O = V.getAsObject();
  if (!O)
    return llvm::createStringError(llvm::inconvertibleErrorCode(),
                                   Where + ": expected a JSON object");
  if (Error E = checkKeys(Where, "", *O, {"device", "source", "curves"}))
    return E;
  auto C = std::make_shared<GemmCalibration>();
  if (const llvm::json::Value *Dev = O->get("device")) {
    auto Name = Dev->getAsString();
    if (!Name)
      return keyError(Where, "device", "expected a string");
    if (!DeviceName.empty() && !Name->equals_insensitive(DeviceName))
      return keyError(Where, "device",
                      "the calibration is for '" + *Name + "', not '" +
                          DeviceName + "'");
  }
  if (const llvm::json::Value *Source = O->get("source")) {
    auto S = Source->getAsString();
    if (!S)
      return keyError(Where, "source", "expected a string");
    C->Source = S->str();
  }
  const llvm::json::Value *CurvesV = O->get("curves");
  const llvm::json::Object *Curves = CurvesV ? CurvesV->getAsObject() : nullptr;
  if (!Curves || Curves->empty())
    return keyError(Where, "curves",
                    "expected an object with a curve per precision");
  if (Error E = checkKeys(Where, "curves.", *Curves,
                          {"fp32", "tf32", "bf16", "fp16"}))
    return E;
  for (const auto &KV : *Curves) {
    auto Curve = parseCurve(Where, KV.first, KV.second);
    if (!Curve)
      return Curve.takeError();
    C->Curves[static_cast<unsigned>(*parsePrecision(KV.first))] =
        std::move(*Curve);
  }
  return std::shared_ptr<const GemmCalibration>(std::move(C));
}

Error autopar::loadCalibration(StringRef Path, DeviceSpec &Device) {
  auto Buffer = llvm::MemoryBuffer::getFile(Path, /*IsText=*/true);
  if (!Buffer)
    return llvm::createStringError(Buffer.getError(),
                                   "cannot read calibration file '" + Path +
                                       "': " + Buffer.getError().message());
  auto V = llvm::json::parse((*Buffer)->getBuffer());
  if (!V)
    return llvm::createStringError(
        llvm::inconvertibleErrorCode(),
        Path + ": invalid JSON: " + llvm::toString(V.takeError()));
  auto New = parseCalibration(*V, Path, Device.Name);
  if (!New)
    return New.takeError();
  addCalibration(Device, std::move(*New));
  return Error::success();
}

void autopar::addCalibration(DeviceSpec &Device,
                             std::shared_ptr<const GemmCalibration> C) {
  auto Merged = std::make_shared<GemmCalibration>(
      Device.Calibration ? *Device.Calibration : GemmCalibration());
  for (unsigned P = 0; P < NumPrecisions; ++P)
    if (C->Curves[P])
      Merged->Curves[P] = C->Curves[P];
  if (Merged->Source.empty())
    Merged->Source = C->Source;
  else if (!C->Source.empty() && C->Source != Merged->Source)
    Merged->Source += "; " + C->Source;
  Device.Calibration = std::move(Merged);
}

llvm::json::Value autopar::calibrationToJSON(const GemmCalibration &C) {
  llvm::json::Object Curves;
  for (unsigned P = 0; P < NumPrecisions; ++P) {
    if (!C.Curves[P])
      continue;
    const GemmCurve &Curve = *C.Curves[P];
    llvm::json::Array Rows;
    size_t At = 0;
    for (size_t I = 0; I < Curve.M.size(); ++I) {
      llvm::json::Array Cols;
      for (size_t J = 0; J < Curve.N.size(); ++J) {
        llvm::json::Array Ks;
        for (size_t L = 0; L < Curve.K.size(); ++L)
          Ks.push_back(Curve.Efficiency[At++]);
        Cols.push_back(std::move(Ks));
      }
      Rows.push_back(std::move(Cols));
    }
    Curves[getPrecisionName(static_cast<Precision>(P))] =
        llvm::json::Object{{"m", Curve.M},
                           {"n", Curve.N},
                           {"k", Curve.K},
                           {"efficiency", std::move(Rows)}};
  }
  llvm::json::Object O{{"curves", std::move(Curves)}};
  if (!C.Source.empty())
    O["source"] = C.Source;
  return O;
}

//===----------------------------------------------------------------------===//
// The `cpu` device's measured curve
//===----------------------------------------------------------------------===//

std::shared_ptr<const GemmCalibration> autopar::getCpuGemmCalibration() {
  // Measured with `bench/cpu-calibrate.sh --calibration cpu.json` on
  // 2026-11-30 (the run Devices.def cites): a blocked fp32 loop on both
  // cores, as a fraction of its best rate, 35.0 GFLOP/s.
  static const std::shared_ptr<const GemmCalibration> Calibration = [] {
    GemmCurve Curve;
    Curve.M = Curve.N = Curve.K = {16, 64, 256, 1024};
    // efficiency[m][n][k] for m, n, k in 16, 64, 256, 1024: two lines per m.
    Curve.Efficiency = {0.009, 0.028, 0.113, 0.290, 0.048, 0.135, 0.401, 0.740,
                        0.126, 0.420, 0.824, 0.964, 0.400, 0.745, 0.914, 0.729,
                        0.036, 0.131, 0.281, 0.387, 0.142, 0.431, 0.770, 0.920,
                        0.475, 0.831, 1.000, 1.000, 0.870, 1.000, 1.000, 1.000,
                        0.137, 0.317, 0.423, 0.476, 0.448, 0.945, 1.000, 1.000,
                        1.000, 1.000, 1.000, 1.000, 1.000, 1.000, 1.000, 1.000,
                        0.325, 0.468, 0.477, 0.462, 0.899, 1.000, 1.000, 0.827,
                        1.000, 1.000, 1.000, 1.000, 1.000, 1.000, 1.000, 1.000};
    auto C = std::make_shared<GemmCalibration>();
    C->Source = "bench/cpu-calibrate.sh, 2026-11-30";
    for (auto &Slot : C->Curves)
      Slot = Curve;
    return std::shared_ptr<const GemmCalibration>(std::move(C));
  }();
  return Calibration;
}
