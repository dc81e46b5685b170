"""Reads the OpenBLAS cores an autopar-run run printed (OPENBLAS_VERBOSE=2
prints "Core: NAME" each time OpenBLAS loads) and says whether the last is
what the CPU allows: `auto` (no OPENBLAS_CORETYPE given) wants a vector core
on a CPU with AVX2 and FMA; `given` (OPENBLAS_CORETYPE=Prescott) wants the
given core kept."""
import sys

mode, path = sys.argv[1], sys.argv[2]
cores = [line.split(":", 1)[1].strip() for line in open(path)
         if line.startswith("Core:")]
last = cores[-1] if cores else "none"
flags = set()
for line in open("/proc/cpuinfo"):
    if line.startswith("flags"):
        flags = set(line.split(":", 1)[1].split())
        break
generic = {"Prescott", "Core2", "Nehalem"}
if mode == "given":
    print("kept: %s" % last if last == "Prescott" else "replaced: %s" % last)
elif {"avx2", "fma"} <= flags:
    print("generic kernels on an AVX2 CPU: %s" % last if last in generic
          else "vector kernels: %s" % last)
else:
    print("SSE kernels only on a CPU without AVX2")
