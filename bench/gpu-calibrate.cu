//===- gpu-calibrate.cu - Measure a GPU for the cost model ----------------===//
//
// Measures, on the GPU it runs on:
//   - cuBLAS GEMM throughput (cublasGemmEx, f32 accumulation) in bf16, fp16,
//     tf32 and fp32 over a grid of shapes, and over the GEMM shapes of a
//     plan (--shapes FILE: lines "M N K [BATCH]", bench/plan-gemm-shapes.py
//     writes them from a program); the best bf16 rate is the measured
//     ceiling;
//   - memory bandwidth: cudaMemcpy device to device, and a streaming kernel;
//   - the runtime's kernels (runtime/cuda/CudaKernels.h) at sizes of a
//     GPT layer (h 4096, seq 2048), as time and effective bandwidth (the
//     flash-attention kernels also as TFLOP/s: they are compute-bound).
// With --calibration FILE it writes the GEMM curves as a calibration file
// for `autopar --calibration FILE` (docs/CostModel.md, "Calibration
// files"): efficiency = measured FLOP/s / the catalog's peak for the
// precision. With --measurements FILE it writes every figure as JSON.
//
// Standalone: it needs the CUDA toolkit (nvcc, cuBLAS) and the runtime's
// .cu files, not LLVM, so scripts/gpu-check.sh can build it on a bare GPU
// machine:
//   nvcc -O2 -std=c++17 -arch=sm_90 -I. bench/gpu-calibrate.cu
//     runtime/cuda/ElementwiseKernels.cu runtime/cuda/RowKernels.cu
//     runtime/cuda/FlashAttentionKernels.cu -lcublas -o gpu-calibrate
// The CMake build makes it as bin/autopar-gpu-calibrate (AUTOPAR_CUDA).
//
//===----------------------------------------------------------------------===//

#include "runtime/cuda/CudaKernels.h"

#include <cublas_v2.h>
#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <cuda_runtime.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <map>
#include <sstream>
#include <string>
#include <vector>

using namespace autopar::cuda;

namespace {

void check(cudaError_t E, const char *What) {
  if (E != cudaSuccess) {
    std::fprintf(stderr, "gpu-calibrate: %s: %s\n", What,
                 cudaGetErrorString(E));
    std::exit(1);
  }
}

void check(cublasStatus_t S, const char *What) {
  if (S != CUBLAS_STATUS_SUCCESS) {
    std::fprintf(stderr, "gpu-calibrate: %s: %s\n", What,
                 cublasGetStatusString(S));
    std::exit(1);
  }
}

/// The catalog's dense peaks (cost/Devices.def, from the NVIDIA datasheets
/// cited there: [H100]/[H200] SXM, [A100] SXM), FLOP/s.
struct Peaks {
  const char *Name;
  double Fp32, Tf32, Bf16, Fp16;
};
const Peaks Catalog[] = {
    {"h200", 67e12, 494.5e12, 989e12, 989e12},
    {"h100", 67e12, 494.5e12, 989e12, 989e12},
    {"a100-80gb", 19.5e12, 156e12, 312e12, 312e12},
    {"a100-40gb", 19.5e12, 156e12, 312e12, 312e12},
};

const Peaks *findPeaks(const std::string &Name) {
  for (const Peaks &P : Catalog)
    if (Name == P.Name)
      return &P;
  return nullptr;
}

/// The catalog's name for the device cudaGetDeviceProperties describes.
std::string catalogName(const cudaDeviceProp &Props) {
  std::string N = Props.name;
  if (N.find("H200") != std::string::npos)
    return "h200";
  if (N.find("H100") != std::string::npos)
    return "h100";
  if (N.find("A100") != std::string::npos)
    return Props.totalGlobalMem > (size_t(60) << 30) ? "a100-80gb"
                                                     : "a100-40gb";
  return "";
}

struct Precision {
  const char *Name;
  cudaDataType_t Type;
  cublasComputeType_t Compute;
  size_t Bytes;
};
const Precision Precisions[] = {
    {"bf16", CUDA_R_16BF, CUBLAS_COMPUTE_32F, 2},
    {"fp16", CUDA_R_16F, CUBLAS_COMPUTE_32F, 2},
    {"tf32", CUDA_R_32F, CUBLAS_COMPUTE_32F_FAST_TF32, 4},
    {"fp32", CUDA_R_32F, CUBLAS_COMPUTE_32F, 4},
};

double peakOf(const Peaks &P, const std::string &Prec) {
  if (Prec == "bf16")
    return P.Bf16;
  if (Prec == "fp16")
    return P.Fp16;
  if (Prec == "tf32")
    return P.Tf32;
  return P.Fp32;
}

/// Fills N elements of type T with hashed values in [-1, 1): random data,
/// since tensor cores run faster on zeros (an 8192-cube bf16 product on an
/// H200 through PyTorch was seen at 788 TFLOP/s on random data and 894 on
/// zeros).
template <typename T> __global__ void fillRandom(T *P, size_t N) {
  for (size_t I = size_t(blockIdx.x) * blockDim.x + threadIdx.x; I < N;
       I += size_t(gridDim.x) * blockDim.x) {
    uint64_t X = (I + 1) * 0x9E3779B97F4A7C15ull;
    X ^= X >> 31;
    X *= 0xBF58476D1CE4E5B9ull;
    X ^= X >> 29;
    P[I] = T(float(X >> 40) / float(1 << 23) - 1.0f);
  }
}

/// Device buffers reused across measurements (grown on demand), filled
/// for the precision being measured.
struct Buffers {
  void *A = nullptr, *B = nullptr, *C = nullptr;
  size_t Size = 0;
  cudaDataType_t Filled = CUDA_R_8I;
  void ensure(size_t Bytes, cudaDataType_t Type) {
    if (Bytes > Size) {
      cudaFree(A);
      cudaFree(B);
      cudaFree(C);
      check(cudaMalloc(&A, Bytes), "cudaMalloc");
      check(cudaMalloc(&B, Bytes), "cudaMalloc");
      check(cudaMalloc(&C, Bytes), "cudaMalloc");
      Size = Bytes;
      Filled = CUDA_R_8I;
    }
    if (Type == Filled)
      return;
    for (void *P : {A, B}) {
      if (Type == CUDA_R_16BF)
        fillRandom<<<4096, 256>>>(static_cast<__nv_bfloat16 *>(P), Size / 2);
      else if (Type == CUDA_R_16F)
        fillRandom<<<4096, 256>>>(static_cast<__half *>(P), Size / 2);
      else
        fillRandom<<<4096, 256>>>(static_cast<float *>(P), Size / 4);
    }
    check(cudaDeviceSynchronize(), "filling the operands");
    Filled = Type;
  }
};

/// Seconds per call of Fn: warm up, then the best mean over 3 batches of
/// calls that each last at least ~20 ms (at most 200 calls).
template <typename FnTy> double timeIt(cudaStream_t S, FnTy Fn) {
  cudaEvent_t Start, Stop;
  check(cudaEventCreate(&Start), "cudaEventCreate");
  check(cudaEventCreate(&Stop), "cudaEventCreate");
  Fn();
  Fn();
  check(cudaStreamSynchronize(S), "warm-up");
  check(cudaEventRecord(Start, S), "cudaEventRecord");
  Fn();
  check(cudaEventRecord(Stop, S), "cudaEventRecord");
  check(cudaEventSynchronize(Stop), "cudaEventSynchronize");
  float Ms = 0;
  cudaEventElapsedTime(&Ms, Start, Stop);
  int Reps = int(std::clamp(20.0 / std::max(Ms, 1e-3f), 1.0, 200.0));
  double Best = 1e30;
  for (int Batch = 0; Batch < 3; ++Batch) {
    check(cudaEventRecord(Start, S), "cudaEventRecord");
    for (int I = 0; I < Reps; ++I)
      Fn();
    check(cudaEventRecord(Stop, S), "cudaEventRecord");
    check(cudaEventSynchronize(Stop), "cudaEventSynchronize");
    cudaEventElapsedTime(&Ms, Start, Stop);
    Best = std::min(Best, double(Ms) / 1e3 / Reps);
  }
  cudaEventDestroy(Start);
  cudaEventDestroy(Stop);
  return Best;
}

struct Gemm {
  cublasHandle_t H;
  cudaStream_t S;
  Buffers Buf;

  /// FLOP/s of Batch row-major [M,K]x[K,N] products in precision P.
  double rate(const Precision &P, long M, long N, long K, long Batch = 1) {
    size_t Bytes = size_t(std::max({M * K, K * N, M * N})) * Batch * P.Bytes;
    Buf.ensure(Bytes, P.Type);
    float Alpha = 1, Beta = 0;
    double T = timeIt(S, [&] {
      // Row-major C = A B is column-major C^T = B^T A^T.
      if (Batch == 1)
        check(cublasGemmEx(H, CUBLAS_OP_N, CUBLAS_OP_N, int(N), int(M), int(K),
                           &Alpha, Buf.B, P.Type, int(N), Buf.A, P.Type, int(K),
                           &Beta, Buf.C, P.Type, int(N), P.Compute,
                           CUBLAS_GEMM_DEFAULT),
              "cublasGemmEx");
      else
        check(cublasGemmStridedBatchedEx(
                  H, CUBLAS_OP_N, CUBLAS_OP_N, int(N), int(M), int(K), &Alpha,
                  Buf.B, P.Type, int(N), K * N, Buf.A, P.Type, int(K), M * K,
                  &Beta, Buf.C, P.Type, int(N), M * N, int(Batch), P.Compute,
                  CUBLAS_GEMM_DEFAULT),
              "cublasGemmStridedBatchedEx");
    });
    return 2.0 * M * N * K * Batch / T;
  }
};

std::string jsonList(const std::vector<long> &V) {
  std::string S = "[";
  for (size_t I = 0; I < V.size(); ++I)
    S += (I ? ", " : "") + std::to_string(V[I]);
  return S + "]";
}

struct OpTime {
  std::string Op, Shape;
  double Seconds, Bytes;
};

} // namespace

int main(int Argc, char **Argv) {
  std::string CalibrationPath, MeasurementsPath, ShapesPath, DeviceName;
  bool Quick = false;
  for (int I = 1; I < Argc; ++I) {
    std::string A = Argv[I];
    auto Value = [&]() -> std::string {
      if (I + 1 >= Argc) {
        std::fprintf(stderr, "gpu-calibrate: %s needs a value\n", A.c_str());
        std::exit(2);
      }
      return Argv[++I];
    };
    if (A == "--calibration")
      CalibrationPath = Value();
    else if (A == "--measurements")
      MeasurementsPath = Value();
    else if (A == "--shapes")
      ShapesPath = Value();
    else if (A == "--device")
      DeviceName = Value();
    else if (A == "--quick")
      Quick = true;
    else {
      std::fprintf(stderr,
                   "usage: gpu-calibrate [--calibration FILE] "
                   "[--measurements FILE] [--shapes FILE] [--device NAME] "
                   "[--quick]\n");
      return 2;
    }
  }
  int Count = 0;
  if (cudaGetDeviceCount(&Count) != cudaSuccess || Count == 0) {
    std::fprintf(stderr, "gpu-calibrate: no CUDA device\n");
    return 1;
  }
  cudaDeviceProp Props;
  check(cudaGetDeviceProperties(&Props, 0), "cudaGetDeviceProperties");
  if (DeviceName.empty())
    DeviceName = catalogName(Props);
  const Peaks *Peak = findPeaks(DeviceName);
  std::printf("device: %s (sm_%d%d, %zu GiB, %d SMs), catalog name '%s'\n",
              Props.name, Props.major, Props.minor, Props.totalGlobalMem >> 30,
              Props.multiProcessorCount, DeviceName.c_str());
  if (!Peak)
    std::printf("note: no catalog peaks for this device; efficiencies are "
                "not computed (give --device h200|h100|a100-80gb)\n");

  Gemm G;
  check(cudaStreamCreate(&G.S), "cudaStreamCreate");
  check(cublasCreate(&G.H), "cublasCreate");
  check(cublasSetStream(G.H, G.S), "cublasSetStream");
  void *Workspace = nullptr;
  check(cudaMalloc(&Workspace, size_t(32) << 20), "cudaMalloc");
  check(cublasSetWorkspace(G.H, Workspace, size_t(32) << 20),
        "cublasSetWorkspace");

  // The grid of the curves: from small products (launch-bound) to ones
  // that fill the device.
  std::vector<long> Grid = Quick ? std::vector<long>{256, 2048, 8192}
                                 : std::vector<long>{256, 1024, 4096, 8192};
  std::map<std::string, std::vector<double>> Curves;
  std::map<std::string, double> Ceiling;
  for (const Precision &P : Precisions) {
    double Best = 0;
    std::vector<double> &Eff = Curves[P.Name];
    for (long M : Grid)
      for (long N : Grid)
        for (long K : Grid) {
          double R = G.rate(P, M, N, K);
          Best = std::max(Best, R);
          Eff.push_back(Peak ? std::clamp(R / peakOf(*Peak, P.Name), 1e-4, 1.0)
                             : 0);
        }
    Ceiling[P.Name] = Best;
    std::printf("%s gemm: best %.1f TFLOP/s", P.Name, Best / 1e12);
    if (Peak)
      std::printf(" (%.1f%% of the catalog's %.1f)",
                  100 * Best / peakOf(*Peak, P.Name),
                  peakOf(*Peak, P.Name) / 1e12);
    std::printf("\n");
  }

  // The plan's GEMMs in bf16.
  struct PlanShape {
    long M, N, K, Batch;
    double Rate;
  };
  std::vector<PlanShape> PlanShapes;
  if (!ShapesPath.empty()) {
    std::ifstream In(ShapesPath);
    std::string Line;
    while (std::getline(In, Line)) {
      std::istringstream L(Line);
      PlanShape S{0, 0, 0, 1, 0};
      if (!(L >> S.M >> S.N >> S.K))
        continue;
      if (!(L >> S.Batch))
        S.Batch = 1;
      S.Rate = G.rate(Precisions[0], S.M, S.N, S.K, S.Batch);
      PlanShapes.push_back(S);
      std::printf("plan gemm %ldx%ldx%ld x%ld: %.1f TFLOP/s\n", S.M, S.N, S.K,
                  S.Batch, S.Rate / 1e12);
    }
  }

  // Memory bandwidth: read + write bytes per copy.
  size_t Bytes = size_t(Quick ? 1 : 4) << 30;
  void *X = nullptr, *Y = nullptr;
  check(cudaMalloc(&X, Bytes), "cudaMalloc");
  check(cudaMalloc(&Y, Bytes), "cudaMalloc");
  check(cudaMemset(X, 0, Bytes), "cudaMemset");
  double CopyT = timeIt(G.S, [&] {
    check(cudaMemcpyAsync(Y, X, Bytes, cudaMemcpyDeviceToDevice, G.S),
          "cudaMemcpyAsync");
  });
  double KernelT = timeIt(G.S, [&] {
    check(streamCopy(static_cast<float *>(X), static_cast<float *>(Y),
                     int64_t(Bytes / 4), G.S),
          "streamCopy");
  });
  double CopyGBs = 2.0 * Bytes / CopyT / 1e9;
  double KernelGBs = 2.0 * Bytes / KernelT / 1e9;
  std::printf("memory: cudaMemcpy d2d %.0f GB/s, streaming kernel %.0f GB/s "
              "(read + write)\n",
              CopyGBs, KernelGBs);

  // The runtime's kernels at the sizes of one GPT layer (h 4096, seq 2048,
  // 32 heads, ffn 16384, vocabulary 50304, batch 1) in bf16.
  std::vector<OpTime> Ops;
  {
    const int64_t Rows = 2048, H = 4096, Heads = 32, Ffn = 16384, Vocab = 50304;
    size_t Need = size_t(Heads * Rows * Rows) * 2; // The attention scores.
    void *P = nullptr, *Q = nullptr, *R = nullptr;
    check(cudaMalloc(&P, Need), "cudaMalloc");
    check(cudaMalloc(&Q, Need), "cudaMalloc");
    check(cudaMalloc(&R, Need), "cudaMalloc");
    check(cudaMemset(P, 0, Need), "cudaMemset");
    check(cudaMemset(Q, 0, Need), "cudaMemset");
    check(cudaMemset(R, 0, Need), "cudaMemset");
    double *Work = nullptr;
    check(cudaMalloc(&Work, size_t(normGradWorkDoubles(Rows, H) + Rows) * 8),
          "cudaMalloc");
    float *Scalars = nullptr;
    check(cudaMalloc(&Scalars, 8 * sizeof(float)), "cudaMalloc");
    float HostScalars[8] = {1e-4f, 0.9f, 0.999f, 1e-8f, 0.01f, 1, 1, 0};
    check(cudaMemcpy(Scalars, HostScalars, sizeof(HostScalars),
                     cudaMemcpyHostToDevice),
          "cudaMemcpy");
    int *ErrorWord = nullptr;
    check(cudaMalloc(&ErrorWord, sizeof(int)), "cudaMalloc");
    auto Add = [&](const char *Op, std::string Shape, double MovedBytes,
                   auto Fn) {
      double T = timeIt(G.S, Fn);
      Ops.push_back({Op, Shape, T, MovedBytes});
      std::printf("kernel %-22s %-22s %8.3f ms %7.0f GB/s\n", Op, Shape.c_str(),
                  T * 1e3, MovedBytes / T / 1e9);
    };
    Add("layernorm", "[2048, 4096]", 2.0 * Rows * H * 2, [&] {
      check(norm(true, DType::BF16, P, DType::BF16, Q, Q, DType::BF16, R,
                 DType::F32, nullptr, nullptr, Rows, H, 1e-5, G.S),
            "norm");
    });
    Add("layernorm-grad", "[2048, 4096]", 3.0 * Rows * H * 2, [&] {
      // dX, then dScale and dBias after it.
      char *DX = static_cast<char *>(R);
      check(normGrad(true, DType::BF16, P, Q, DType::BF16, Q, DX,
                     DX + Rows * H * 2, DX + Rows * H * 2 + H * 2, Rows, H,
                     1e-5, Work, G.S),
            "normGrad");
    });
    Add("softmax", "[32, 2048, 2048]", 2.0 * Heads * Rows * Rows * 2, [&] {
      check(softmax(DType::BF16, P, DType::BF16, Q, Heads * Rows, Rows, 1,
                    false, G.S),
            "softmax");
    });
    Add("softmax-grad", "[32, 2048, 2048]", 3.0 * Heads * Rows * Rows * 2, [&] {
      check(softmaxGrad(DType::BF16, P, Q, R, Heads * Rows, Rows, 1, G.S),
            "softmaxGrad");
    });
    {
      // Causal flash attention over [1, 32, 2048, 128] (Q, K, V, dY in P;
      // Y and the statistics in R; dQ, dK, dV in Q). FLOPs as the kernels
      // do them: the forward's two products over the causal half, the
      // gradient's statistics pass, dQ (three products) and dK, dV (four).
      const int64_t Dh = H / Heads, Elems = Heads * Rows * Dh;
      char *In = static_cast<char *>(P), *Grads = static_cast<char *>(Q);
      char *Out = static_cast<char *>(R);
      FlashShape F;
      F.B = 1;
      F.Hq = F.Hkv = Heads;
      F.Sq = F.Skv = Rows;
      F.D = F.Dv = Dh;
      F.Scale = 1 / std::sqrt(float(Dh));
      F.Causal = true;
      AttentionMask NoMask;
      double Half = 2.0 * Heads * Rows * Rows * Dh / 2; // One causal product.
      auto Flash = [&](const char *Op, double Products, double Moved, auto Fn) {
        Add(Op, "[1, 32, 2048, 128]", Moved, Fn);
        std::printf("kernel %-22s %7.1f TFLOP/s\n", Op,
                    Products * Half / Ops.back().Seconds / 1e12);
      };
      Flash("flash-attention", 2, 4.0 * Elems * 2, [&] {
        check(flashAttention(DType::BF16, In, In + Elems * 2, In + Elems * 4,
                             NoMask, F, Out, nullptr, G.S),
              "flashAttention");
      });
      Flash("flash-attention-grad", 9, 7.0 * Elems * 2, [&] {
        check(flashAttentionGrad(DType::BF16, In + Elems * 6, In,
                                 In + Elems * 2, In + Elems * 4, NoMask, F,
                                 Grads, Grads + Elems * 2, Grads + Elems * 4,
                                 reinterpret_cast<float *>(Out), G.S),
              "flashAttentionGrad");
      });
    }
    Add("gelu-tanh", "[2048, 16384]", 2.0 * Rows * Ffn * 2, [&] {
      check(unary(UnaryOp::GeluTanh, 0, 0, DType::BF16, P, DType::BF16, Q,
                  Rows * Ffn, G.S),
            "unary");
    });
    Add("gelu-grad", "[2048, 16384]", 3.0 * Rows * Ffn * 2, [&] {
      check(geluGrad(DType::BF16, P, Q, R, Rows * Ffn, true, G.S), "geluGrad");
    });
    Strides In, Out;
    Dims D;
    D.Rank = 3;
    D.Size[0] = Heads;
    D.Size[1] = Rows;
    D.Size[2] = H / Heads; // [S, heads, d] -> [heads, S, d]
    In.S[0] = H / Heads;
    In.S[1] = H;
    In.S[2] = 1;
    Out.S[0] = Rows * (H / Heads);
    Out.S[1] = H / Heads;
    Out.S[2] = 1;
    Add("transpose", "[2048, 32, 128]", 2.0 * Rows * H * 2, [&] {
      check(copyStrided(Q, 0, Out, P, 0, In, D, 2, G.S), "copyStrided");
    });
    Strides XS, YS;
    Dims B;
    B.Rank = 2;
    B.Size[0] = Rows;
    B.Size[1] = Ffn;
    XS.S[0] = Ffn;
    XS.S[1] = 1;
    YS.S[1] = 1; // A bias row, broadcast.
    Add("add-bias", "[2048, 16384]", 2.0 * Rows * Ffn * 2, [&] {
      check(binary(BinaryOp::Add, DType::BF16, P, XS, DType::BF16, Q, YS,
                   DType::BF16, R, B, G.S),
            "binary");
    });
    int64_t Params = int64_t(Need / 2 / 4); // Four bf16 tensors fit in P..R.
    AdamWScalars S{Scalars,     Scalars + 1, Scalars + 2,
                   Scalars + 3, Scalars + 4, Scalars + 5};
    Add("adamw", "[" + std::to_string(Params) + "]", 7.0 * Params * 2, [&] {
      check(adamw(DType::BF16, P, DType::BF16, Q, DType::BF16, R, DType::BF16,
                  static_cast<char *>(P) + Params * 2, Params, S, G.S),
            "adamw");
    });
    Add("cross-entropy", "[2048, 50304]", 1.0 * Rows * Vocab * 2 * 2, [&] {
      check(crossEntropy(DType::BF16, P, Q, false, DType::F32, Scalars + 7,
                         Rows, Vocab, -100, true, Work, ErrorWord, 1, G.S),
            "crossEntropy");
    });
    cudaFree(P);
    cudaFree(Q);
    cudaFree(R);
    cudaFree(Work);
    cudaFree(Scalars);
    cudaFree(ErrorWord);
  }

  if (!CalibrationPath.empty()) {
    if (!Peak) {
      std::fprintf(stderr, "gpu-calibrate: --calibration needs the catalog's "
                           "peaks: give --device\n");
      return 1;
    }
    FILE *F = std::fopen(CalibrationPath.c_str(), "w");
    if (!F) {
      std::fprintf(stderr, "gpu-calibrate: cannot write %s\n",
                   CalibrationPath.c_str());
      return 1;
    }
    int Runtime = 0;
    cudaRuntimeGetVersion(&Runtime);
    std::fprintf(F,
                 "{\n  \"device\": \"%s\",\n  \"source\": \"bench/"
                 "gpu-calibrate.cu on %s, cublasGemmEx (f32 accumulation), "
                 "CUDA runtime %d.%d, fraction of the catalog's peak\",\n"
                 "  \"curves\": {\n",
                 DeviceName.c_str(), Props.name, Runtime / 1000,
                 Runtime % 1000 / 10);
    size_t PI = 0;
    for (const Precision &P : Precisions) {
      std::fprintf(F,
                   "    \"%s\": {\n      \"m\": %s,\n      \"n\": %s,\n"
                   "      \"k\": %s,\n      \"efficiency\": [\n",
                   P.Name, jsonList(Grid).c_str(), jsonList(Grid).c_str(),
                   jsonList(Grid).c_str());
      const std::vector<double> &Eff = Curves[P.Name];
      size_t At = 0;
      for (size_t I = 0; I < Grid.size(); ++I) {
        std::fprintf(F, "        [");
        for (size_t J = 0; J < Grid.size(); ++J) {
          std::fprintf(F, "%s[", J ? ", " : "");
          for (size_t L = 0; L < Grid.size(); ++L)
            std::fprintf(F, "%s%.4f", L ? ", " : "", Eff[At++]);
          std::fprintf(F, "]");
        }
        std::fprintf(F, "]%s\n", I + 1 < Grid.size() ? "," : "");
      }
      std::fprintf(F, "      ]\n    }%s\n",
                   ++PI < sizeof(Precisions) / sizeof(Precisions[0]) ? ","
                                                                     : "");
    }
    std::fprintf(F, "  }\n}\n");
    std::fclose(F);
    std::printf("wrote %s\n", CalibrationPath.c_str());
  }

  if (!MeasurementsPath.empty()) {
    FILE *F = std::fopen(MeasurementsPath.c_str(), "w");
    if (!F) {
      std::fprintf(stderr, "gpu-calibrate: cannot write %s\n",
                   MeasurementsPath.c_str());
      return 1;
    }
    std::fprintf(F, "{\n  \"device\": \"%s\",\n  \"gpu\": \"%s\",\n",
                 DeviceName.c_str(), Props.name);
    std::fprintf(F, "  \"gemm_best_tflops\": {");
    size_t PI = 0;
    for (const Precision &P : Precisions)
      std::fprintf(F, "%s\"%s\": %.2f", PI++ ? ", " : "", P.Name,
                   Ceiling[P.Name] / 1e12);
    std::fprintf(F, "},\n  \"catalog_peak_tflops\": {");
    PI = 0;
    for (const Precision &P : Precisions)
      std::fprintf(F, "%s\"%s\": %.2f", PI++ ? ", " : "", P.Name,
                   Peak ? peakOf(*Peak, P.Name) / 1e12 : 0.0);
    std::fprintf(F,
                 "},\n  \"memcpy_gbs\": %.1f,\n  \"stream_kernel_gbs\": "
                 "%.1f,\n  \"kernels\": [\n",
                 CopyGBs, KernelGBs);
    for (size_t I = 0; I < Ops.size(); ++I)
      std::fprintf(F,
                   "    {\"op\": \"%s\", \"shape\": \"%s\", \"ms\": %.4f, "
                   "\"gbs\": %.1f}%s\n",
                   Ops[I].Op.c_str(), Ops[I].Shape.c_str(),
                   Ops[I].Seconds * 1e3, Ops[I].Bytes / Ops[I].Seconds / 1e9,
                   I + 1 < Ops.size() ? "," : "");
    std::fprintf(F, "  ],\n  \"plan_gemms\": [\n");
    for (size_t I = 0; I < PlanShapes.size(); ++I)
      std::fprintf(F,
                   "    {\"m\": %ld, \"n\": %ld, \"k\": %ld, \"batch\": %ld, "
                   "\"tflops\": %.2f}%s\n",
                   PlanShapes[I].M, PlanShapes[I].N, PlanShapes[I].K,
                   PlanShapes[I].Batch, PlanShapes[I].Rate / 1e12,
                   I + 1 < PlanShapes.size() ? "," : "");
    std::fprintf(F, "  ]\n}\n");
    std::fclose(F);
    std::printf("wrote %s\n", MeasurementsPath.c_str());
  }
  return 0;
}
