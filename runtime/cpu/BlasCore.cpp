//===- BlasCore.cpp - OpenBLAS's kernels for this CPU ---------------------===//

#include "runtime/cpu/BlasCore.h"

#include "llvm/ADT/StringSwitch.h"

#include <cstdlib>
#include <unistd.h>

// OpenBLAS's own call; declared here in case the cblas.h found is another
// implementation's.
extern "C" char *openblas_get_corename(void);

using namespace autopar;
using namespace llvm;

StringRef autopar::getBestBlasCore() {
#if defined(__x86_64__)
  __builtin_cpu_init();
  if (__builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512bw") &&
      __builtin_cpu_supports("avx512dq") && __builtin_cpu_supports("avx512vl"))
    return "SkylakeX";
  if (__builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma"))
    return "Haswell";
#endif
  return "";
}

void autopar::restartWithBlasSettings(char **Argv) {
  bool Changed = false;
  if (!std::getenv("OPENBLAS_CORETYPE")) {
    const char *Loaded = openblas_get_corename();
    bool Generic = StringSwitch<bool>(Loaded ? StringRef(Loaded).lower() : "")
                       .Cases("prescott", "core2", "nehalem", "unknown", true)
                       .Default(false);
    StringRef Best = getBestBlasCore();
    if (Generic && !Best.empty())
      Changed |= ::setenv("OPENBLAS_CORETYPE", Best.str().c_str(), 1) == 0;
  }
  if (!std::getenv("OPENBLAS_THREAD_TIMEOUT"))
    Changed |= ::setenv("OPENBLAS_THREAD_TIMEOUT", BlasThreadTimeout, 1) == 0;
  if (!Changed)
    return;
  ::execv("/proc/self/exe", Argv);
  // The exec failed: go on with OpenBLAS as it loaded (the variables stay
  // set for the programs this one starts, which is harmless).
}
