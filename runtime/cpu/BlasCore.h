//===- BlasCore.h - OpenBLAS's kernels for this CPU -------------*- C++ -*-===//
//
// Debian 12's OpenBLAS (0.3.21, built for every x86-64 core: DYNAMIC_ARCH)
// picks its kernels from the CPU's model number when it loads, and on CPUs
// newer than it knows (the Xeons of recent clouds, "Intel(R) Xeon(R)
// Processor" under KVM) it falls back to its SSE3 kernels (Prescott): an
// f32 GEMM then runs at a fifth of the AVX-512 kernels' rate (19 against
// 88 GFLOP/s on one core here, measured with `autopar-run --profile`).
// OpenBLAS reads OPENBLAS_CORETYPE only when it loads, so a program that
// wants other kernels must set it and start again.
//
// The same holds for OPENBLAS_THREAD_TIMEOUT: after a GEMM, OpenBLAS's
// threads spin for 2^28 cycles (its default) before they sleep, and on a
// machine with a core per thread they then take the cores the kernels'
// own threads (parallelFor) need. 2^20 cycles (about 0.4 ms) keeps them
// ready between the GEMMs of a layer: the bench's GPT at 2 threads took
// 180 ms per step with the default, 159 with 2^16 and 2^20, 202 with 2^4
// (autopar-run --profile, 2026-12-06).
//
//===----------------------------------------------------------------------===//

#ifndef AUTOPAR_RUNTIME_CPU_BLASCORE_H
#define AUTOPAR_RUNTIME_CPU_BLASCORE_H

#include "llvm/ADT/StringRef.h"

namespace autopar {

/// The OpenBLAS core (an OPENBLAS_CORETYPE value) of the widest vector
/// instructions this CPU has: "SkylakeX" with AVX-512 (F, BW, DQ, VL),
/// "Haswell" with AVX2 and FMA, else empty (the core OpenBLAS detects is
/// then as good).
llvm::StringRef getBestBlasCore();

/// The OPENBLAS_THREAD_TIMEOUT autopar sets (2^N cycles of spinning).
constexpr const char *BlasThreadTimeout = "20";

/// Sets, where they are unset, OPENBLAS_CORETYPE to getBestBlasCore() when
/// OpenBLAS loaded its SSE kernels (Prescott, Core2 or Nehalem) on a CPU
/// with AVX2 or AVX-512, and OPENBLAS_THREAD_TIMEOUT to BlasThreadTimeout;
/// then, if it set either, executes this program again (/proc/self/exe,
/// the same Argv; the process keeps its id, so under mpirun the rank stays
/// the rank). Returns if nothing is to be done or the exec failed. Call it
/// first in main, before threads or MPI start.
void restartWithBlasSettings(char **Argv);

} // namespace autopar

#endif // AUTOPAR_RUNTIME_CPU_BLASCORE_H
