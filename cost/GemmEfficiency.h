//===- GemmEfficiency.h - Fraction of peak a matmul reaches -----*- C++ -*-===//
//
// How close a [M,K]x[K,N] product (Batch independent ones) comes to the
// device's peak FLOP/s. The analytic model: cuBLAS-like output tiles
// (256x128 down to 64x64, larger tiles more efficient), tile and wave
// quantization over the SMs, a roll-off for small K (pipeline fill and
// epilogue), the device's achievable asymptote, the memory roofline for
// skinny products, and a fixed kernel cost. A calibration table measured on
// the device (by the runtime's benchmarks, bench/cpu-calibrate.sh for `cpu`)
// replaces the model for the precisions it covers. docs/CostModel.md ("GEMM
// efficiency") gives the formulas, their sources and the file format.
//
// gemmEfficiency is deterministic and allocation-free: the planner calls it
// millions of times.
//
//===----------------------------------------------------------------------===//

#ifndef AUTOPAR_COST_GEMMEFFICIENCY_H
#define AUTOPAR_COST_GEMMEFFICIENCY_H

#include "cost/Cluster.h"

#include "llvm/Support/Error.h"
#include "llvm/Support/JSON.h"

#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <vector>

namespace autopar {

/// Measured efficiency on a grid of shapes, for one precision: Efficiency
/// holds one value per (m, n, k) grid point, k fastest. Lookups interpolate
/// linearly in log2 of each dimension.
struct GemmCurve {
  std::vector<int64_t> M, N, K; // strictly increasing, positive
  std::vector<double> Efficiency;

  /// The efficiency at a shape. Inside the grid: trilinear in log space.
  /// Above the largest point of a dimension: the edge value. Below the
  /// smallest: the edge value scaled by Dim / Smallest (a product too small
  /// to fill the device does proportionally less work in the same time).
  double lookup(double M, double N, double K) const;
};

/// The curves of one device, by precision (absent: the analytic model).
struct GemmCalibration {
  std::string Source;
  std::optional<GemmCurve> Curves[NumPrecisions];
};

/// Fraction of Device.PeakFlops(P) that Batch independent [M,K]x[K,N]
/// products reach, in (0, 1]. A calibrated curve looks Batch up as
/// M * Batch. Empty products (a zero dimension) return 1: they take no time.
double gemmEfficiency(const DeviceSpec &Device, Precision P, int64_t M,
                      int64_t N, int64_t K, int64_t Batch = 1);
/// Seconds for the same products: 2*M*N*K*Batch FLOPs at that efficiency.
double gemmSeconds(const DeviceSpec &Device, Precision P, int64_t M, int64_t N,
                   int64_t K, int64_t Batch = 1);

/// Seconds for products that run at Peak (an integer product's) or whose
/// operands are not all in precision P (MatMulNBits' packed weight): the
/// analytic model with that peak and a roofline over Bytes, the operands'
/// and result's. A calibrated curve of P, measured on dense operands, is
/// scaled from P's peak to Peak and keeps its own roofline.
double gemmSecondsAt(const DeviceSpec &Device, Precision P, double Peak,
                     double Bytes, int64_t M, int64_t N, int64_t K,
                     int64_t Batch = 1);

/// Reads a calibration file (docs/CostModel.md) and makes its curves
/// Device's: they replace the analytic model, or an earlier calibration,
/// for the precisions the file lists. A file that names another device is
/// an error. Errors name the file and the key.
llvm::Error loadCalibration(llvm::StringRef Path, DeviceSpec &Device);
/// Makes C's curves Device's, for the precisions C covers (the others keep
/// what Device had).
void addCalibration(DeviceSpec &Device,
                    std::shared_ptr<const GemmCalibration> C);
/// Reads a calibration from JSON (a file's contents, or a cluster file's
/// `gemm_calibration` object); Where prefixes errors ("FILE: key").
llvm::Expected<std::shared_ptr<const GemmCalibration>>
parseCalibration(const llvm::json::Value &V, llvm::StringRef Where,
                 llvm::StringRef DeviceName);
/// The calibration in the file format (without `device`); parseCalibration
/// reads it back.
llvm::json::Value calibrationToJSON(const GemmCalibration &C);

/// The `cpu` device's built-in curves, measured with bench/cpu-calibrate.sh
/// (the same curve for every precision: the CPU runtime computes in fp32).
std::shared_ptr<const GemmCalibration> getCpuGemmCalibration();

} // namespace autopar

#endif // AUTOPAR_COST_GEMMEFFICIENCY_H
