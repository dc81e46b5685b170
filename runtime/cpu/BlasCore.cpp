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

void autopar::restartWithBestBlasCore(char **Argv) {
  if (std::getenv("OPENBLAS_CORETYPE"))
    return;
  const char *Loaded = openblas_get_corename();
  bool Generic = StringSwitch<bool>(Loaded ? StringRef(Loaded).lower() : "")
                     .Cases("prescott", "core2", "nehalem", "unknown", true)
                     .Default(false);
  StringRef Best = getBestBlasCore();
  if (!Generic || Best.empty())
    return;
  if (::setenv("OPENBLAS_CORETYPE", Best.str().c_str(), 1) != 0)
    return;
  ::execv("/proc/self/exe", Argv);
  // The exec failed: go on with the kernels loaded, and leave the variable
  // unset for the programs this one starts.
  ::unsetenv("OPENBLAS_CORETYPE");
}
