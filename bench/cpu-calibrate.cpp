//===- cpu-calibrate.cpp - Measure this machine for the `cpu` device ------===//
//
// Measures what the `cpu` row of cost/Devices.def needs, on the machine it
// runs on: the fp32 GEMM rate of a plain cache-blocked loop (the kind of
// kernel the CPU runtime runs), the STREAM triad and copy bandwidth of main
// memory, and the one-way latency between two cores (a cache-line ping-pong,
// a lower bound for an MPI shared-memory message). Every figure is the best
// of several repetitions, over all cores and over one core.
//
// With --calibration FILE it also writes a GEMM calibration table for the
// `cpu` device in the format docs/CostModel.md describes ("GEMM efficiency").
//
// Build and run through bench/cpu-calibrate.sh.
//
//===----------------------------------------------------------------------===//

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <functional>
#include <string>
#include <thread>
#include <vector>

namespace {

double now() {
  return std::chrono::duration<double>(
             std::chrono::steady_clock::now().time_since_epoch())
      .count();
}

/// Runs Fn(ThreadIndex) on NumThreads threads and returns the wall time.
double runParallel(unsigned NumThreads,
                   const std::function<void(unsigned)> &Fn) {
  std::vector<std::thread> Threads;
  double Start = now();
  for (unsigned T = 0; T < NumThreads; ++T)
    Threads.emplace_back(Fn, T);
  for (auto &T : Threads)
    T.join();
  return now() - Start;
}

/// C[M,N] += A[M,K] * B[K,N], row-major, rows [RowBegin, RowEnd) of C. A
/// plain blocked i-k-j loop: the compiler vectorizes the innermost loop over
/// N; blocks of K and N keep the B panel in cache.
void gemmRows(const float *A, const float *B, float *C, int M, int N, int K,
              int RowBegin, int RowEnd) {
  (void)M;
  constexpr int KC = 256, NC = 512, MC = 64;
  for (int J0 = 0; J0 < N; J0 += NC) {
    int J1 = std::min(N, J0 + NC);
    for (int K0 = 0; K0 < K; K0 += KC) {
      int K1 = std::min(K, K0 + KC);
      for (int I0 = RowBegin; I0 < RowEnd; I0 += MC) {
        int I1 = std::min(RowEnd, I0 + MC);
        for (int I = I0; I < I1; ++I) {
          float *__restrict CRow = C + (size_t)I * N;
          for (int P = K0; P < K1; ++P) {
            float AV = A[(size_t)I * K + P];
            const float *__restrict BRow = B + (size_t)P * N;
            for (int J = J0; J < J1; ++J)
              CRow[J] += AV * BRow[J];
          }
        }
      }
    }
  }
}

/// Best GFLOP/s of an [M,K]x[K,N] product over Reps runs on NumThreads
/// threads (rows of C split evenly).
double gemmGflops(int M, int N, int K, unsigned NumThreads, int Reps) {
  std::vector<float> A((size_t)M * K, 0.5f), B((size_t)K * N, 0.25f),
      C((size_t)M * N, 0.0f);
  double Best = 1e30;
  for (int R = 0; R < Reps; ++R) {
    unsigned Used = std::min<unsigned>(NumThreads, (unsigned)M);
    double T = runParallel(Used, [&](unsigned I) {
      int Begin = (int)((int64_t)M * I / Used);
      int End = (int)((int64_t)M * (I + 1) / Used);
      gemmRows(A.data(), B.data(), C.data(), M, N, K, Begin, End);
    });
    Best = std::min(Best, T);
  }
  if (C[0] == 42.0f) // Keep the result alive.
    std::puts("");
  return 2.0 * M * N * K / Best / 1e9;
}

/// Best Gop/s of an integer [M,K]x[K,N] product (u8 codes, i32 sums) with
/// the loop of the CPU runtime's MatMulInteger (runtime/cpu/
/// QuantizedKernels.cpp): B's codes minus their zero point widened to i32
/// once, then rows of A times them, on NumThreads threads.
double int8GemmGops(int M, int N, int K, unsigned NumThreads, int Reps) {
  std::vector<uint8_t> A((size_t)M * K, 3), B((size_t)K * N, 5);
  std::vector<int32_t> C((size_t)M * N, 0), BWide((size_t)K * N);
  double Best = 1e30;
  for (int R = 0; R < Reps; ++R) {
    double Start = now();
    for (size_t I = 0; I < BWide.size(); ++I)
      BWide[I] = int32_t(B[I]) - 1;
    unsigned Used = std::min<unsigned>(NumThreads, (unsigned)M);
    runParallel(Used, [&](unsigned T) {
      int Begin = (int)((int64_t)M * T / Used);
      int End = (int)((int64_t)M * (T + 1) / Used);
      for (int I = Begin; I < End; ++I) {
        int32_t *__restrict Acc = C.data() + (size_t)I * N;
        std::fill(Acc, Acc + N, 0);
        for (int P = 0; P < K; ++P) {
          int32_t V = int32_t(A[(size_t)I * K + P]) - 2;
          const int32_t *__restrict Row = BWide.data() + (size_t)P * N;
          for (int J = 0; J < N; ++J)
            Acc[J] += V * Row[J];
        }
      }
    });
    Best = std::min(Best, now() - Start);
  }
  if (C[0] == 42) // Keep the result alive.
    std::puts("");
  return 2.0 * M * N * K / Best / 1e9;
}

/// Best STREAM triad (a = b + s*c) and copy (a = b) bandwidth in GB/s,
/// counted as STREAM counts them (3 and 2 arrays of 8-byte doubles per
/// element), over arrays of Elems doubles each.
void streamGBs(size_t Elems, unsigned NumThreads, int Reps, double &Triad,
               double &Copy) {
  std::vector<double> A(Elems), B(Elems), C(Elems);
  // First touch by the threads that will use the pages.
  runParallel(NumThreads, [&](unsigned T) {
    size_t Begin = Elems * T / NumThreads, End = Elems * (T + 1) / NumThreads;
    for (size_t I = Begin; I < End; ++I) {
      A[I] = 1.0;
      B[I] = 2.0;
      C[I] = 0.5;
    }
  });
  double BestTriad = 1e30, BestCopy = 1e30;
  for (int R = 0; R < Reps; ++R) {
    BestTriad =
        std::min(BestTriad, runParallel(NumThreads, [&](unsigned T) {
                   size_t Begin = Elems * T / NumThreads,
                          End = Elems * (T + 1) / NumThreads;
                   double *__restrict AP = A.data();
                   const double *__restrict BP = B.data(), *__restrict CP =
                                                               C.data();
                   for (size_t I = Begin; I < End; ++I)
                     AP[I] = BP[I] + 3.0 * CP[I];
                 }));
    BestCopy = std::min(BestCopy, runParallel(NumThreads, [&](unsigned T) {
                          size_t Begin = Elems * T / NumThreads,
                                 End = Elems * (T + 1) / NumThreads;
                          std::memcpy(C.data() + Begin, B.data() + Begin,
                                      (End - Begin) * sizeof(double));
                        }));
  }
  if (A[Elems / 2] == 42.0 || C[Elems / 3] == 42.0)
    std::puts("");
  Triad = 3.0 * 8.0 * Elems / BestTriad / 1e9;
  Copy = 2.0 * 8.0 * Elems / BestCopy / 1e9;
}

/// One-way latency between two threads in seconds: half the best round
/// trip of a flag bounced through one cache line.
double pingPongSeconds(int Rounds) {
  alignas(64) std::atomic<int> Flag{0};
  double Best = 1e30;
  for (int Rep = 0; Rep < 5; ++Rep) {
    Flag.store(0);
    std::thread Peer([&] {
      for (int I = 0; I < Rounds; ++I) {
        while (Flag.load(std::memory_order_acquire) != 2 * I + 1)
          ;
        Flag.store(2 * I + 2, std::memory_order_release);
      }
    });
    double Start = now();
    for (int I = 0; I < Rounds; ++I) {
      Flag.store(2 * I + 1, std::memory_order_release);
      while (Flag.load(std::memory_order_acquire) != 2 * I + 2)
        ;
    }
    double T = now() - Start;
    Peer.join();
    Best = std::min(Best, T / Rounds / 2);
  }
  return Best;
}

void writeCalibration(const char *Path, unsigned NumThreads, double Peak) {
  const int Sizes[] = {16, 64, 256, 1024};
  FILE *F = std::fopen(Path, "w");
  if (!F) {
    std::fprintf(stderr, "cpu-calibrate: cannot write %s\n", Path);
    std::exit(1);
  }
  std::fprintf(F,
               "{\n  \"device\": \"cpu\",\n  \"source\": \"bench/"
               "cpu-calibrate.sh, blocked fp32 loop on %u threads, "
               "fraction of %.1f GFLOP/s\",\n  \"curves\": {\n    \"fp32\": "
               "{\n",
               NumThreads, Peak);
  auto List = [&](const char *Name) {
    std::fprintf(F, "      \"%s\": [", Name);
    for (int I = 0; I < 4; ++I)
      std::fprintf(F, "%s%d", I ? ", " : "", Sizes[I]);
    std::fprintf(F, "],\n");
  };
  List("m");
  List("n");
  List("k");
  std::fprintf(F, "      \"efficiency\": [\n");
  for (int I = 0; I < 4; ++I) {
    std::fprintf(F, "        [");
    for (int J = 0; J < 4; ++J) {
      std::fprintf(F, "%s[", J ? ", " : "");
      for (int L = 0; L < 4; ++L) {
        int M = Sizes[I], N = Sizes[J], K = Sizes[L];
        // Enough repetitions that a small product runs for a while.
        double Flops = 2.0 * M * N * K;
        int Reps = (int)std::clamp(2e8 / Flops, 3.0, 2000.0);
        double E = gemmGflops(M, N, K, NumThreads, Reps) / Peak;
        std::fprintf(F, "%s%.3f", L ? ", " : "", std::min(E, 1.0));
      }
      std::fprintf(F, "]");
    }
    std::fprintf(F, "]%s\n", I < 3 ? "," : "");
  }
  std::fprintf(F, "      ]\n    }\n  }\n}\n");
  std::fclose(F);
}

} // namespace

int main(int Argc, char **Argv) {
  const char *Calibration = nullptr;
  for (int I = 1; I < Argc; ++I) {
    if (!std::strcmp(Argv[I], "--calibration") && I + 1 < Argc)
      Calibration = Argv[++I];
    else {
      std::fprintf(stderr, "usage: cpu-calibrate [--calibration FILE]\n");
      return 1;
    }
  }
  unsigned Cores = std::max(1u, std::thread::hardware_concurrency());
  std::printf("cores: %u\n", Cores);

  // The rate of the loop: the best over square products from in-cache to
  // far beyond the last-level cache.
  double G1 = 0, GAll = 0;
  for (int N : {512, 1024, 2048}) {
    double One = gemmGflops(N, N, N, 1, 3);
    double All = gemmGflops(N, N, N, Cores, 3);
    std::printf("fp32 gemm %dx%dx%d: %.1f GFLOP/s on 1 core, %.1f GFLOP/s on "
                "%u cores\n",
                N, N, N, One, All, Cores);
    G1 = std::max(G1, One);
    GAll = std::max(GAll, All);
  }
  std::printf("fp32 gemm best: %.1f GFLOP/s on 1 core, %.1f GFLOP/s on %u "
              "cores\n",
              G1, GAll, Cores);

  double I1 = 0, IAll = 0;
  for (int N : {512, 1024}) {
    I1 = std::max(I1, int8GemmGops(N, N, N, 1, 3));
    IAll = std::max(IAll, int8GemmGops(N, N, N, Cores, 3));
  }
  std::printf("int8 gemm best: %.1f Gop/s on 1 core, %.1f Gop/s on %u cores\n",
              I1, IAll, Cores);

  // 3 arrays of 2^26 doubles: 1.5 GiB, far beyond any last-level cache.
  const size_t Elems = size_t(1) << 26;
  double Triad1, Copy1, TriadAll, CopyAll;
  streamGBs(Elems, 1, 5, Triad1, Copy1);
  streamGBs(Elems, Cores, 5, TriadAll, CopyAll);
  std::printf("stream triad: %.1f GB/s on 1 core, %.1f GB/s on %u cores\n",
              Triad1, TriadAll, Cores);
  std::printf("stream copy:  %.1f GB/s on 1 core, %.1f GB/s on %u cores\n",
              Copy1, CopyAll, Cores);

  if (Cores > 1)
    std::printf("core-to-core one-way latency: %.0f ns\n",
                pingPongSeconds(200000) * 1e9);

  if (Calibration) {
    writeCalibration(Calibration, Cores, GAll);
    std::printf("wrote %s\n", Calibration);
  }
  return 0;
}
