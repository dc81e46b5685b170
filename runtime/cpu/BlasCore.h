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

/// When OpenBLAS loaded its SSE kernels (Prescott, Core2 or Nehalem) on a
/// CPU with AVX2 or AVX-512, and OPENBLAS_CORETYPE is unset, sets it to
/// getBestBlasCore() and executes this program again (/proc/self/exe, the
/// same Argv and environment; the process keeps its id, so under mpirun the
/// rank stays the rank). Returns if nothing is to be done or the exec
/// failed. Call it first in main, before threads or MPI start.
void restartWithBestBlasCore(char **Argv);

} // namespace autopar

#endif // AUTOPAR_RUNTIME_CPU_BLASCORE_H
