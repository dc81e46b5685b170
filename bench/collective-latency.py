"""The CPU runtime's collective call latency on this machine.

Runs `autopar-run --eval` on 2 ranks over programs of N chained all-reduces
of one float (N = 5000 and 20000) and prints the time per call from the
difference (so that start-up and parsing cancel), the best of three runs of
each. What a small collective costs in MpiCommunicator (runtime/cpu), the
`cpu` device's CollectiveLatencySec (cost/Devices.def).

  collective-latency.py AUTOPAR_RUN WORKDIR
"""
import os
import subprocess
import sys
import time


def program(n):
    lines = ["graph @latency(%x: f32[1]) {", "  mesh @m = [dp = 2]"]
    prev = "%x"
    for i in range(n):
        lines.append('  %%a%d = AllReduce(%s) {axis = "dp", mesh = "m"} : '
                     'f32[1]' % (i, prev))
        prev = "%%a%d" % i
    lines.append("  return %s" % prev)
    lines.append("}")
    return "\n".join(lines) + "\n"


def main(argv):
    if len(argv) != 3:
        sys.exit(__doc__)
    run, work = argv[1], argv[2]
    env = dict(os.environ, OMPI_ALLOW_RUN_AS_ROOT="1",
               OMPI_ALLOW_RUN_AS_ROOT_CONFIRM="1")
    with open(os.path.join(work, "x.bin"), "wb") as f:
        f.write(b"\x00\x00\x80\x3f")
    best = {}
    for n in (5000, 20000):
        path = os.path.join(work, "allreduce-%d.air" % n)
        with open(path, "w") as f:
            f.write(program(n))
        for _ in range(3):
            start = time.monotonic()
            subprocess.run(["mpirun", "--oversubscribe", "-np", "2", run,
                            "--eval", path, "--input",
                            "x=" + os.path.join(work, "x.bin"), "-o",
                            os.path.join(work, "out-%d" % n)],
                           check=True, env=env, capture_output=True)
            took = time.monotonic() - start
            best[n] = min(best.get(n, took), took)
    per_call = (best[20000] - best[5000]) / 15000
    print("collective latency: %.1f us per all-reduce of one float, 2 ranks"
          % (per_call * 1e6))


if __name__ == "__main__":
    main(sys.argv)
