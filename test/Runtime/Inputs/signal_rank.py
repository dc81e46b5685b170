"""Sends a signal to one rank of a running mpirun job, once it has started.

Usage: signal_rank.py PROGRAM RANK SIGNAL WAIT_FILE PATTERN [TIMEOUT_S]

Waits (at most TIMEOUT_S seconds, default 60) until WAIT_FILE holds a line
containing PATTERN, then finds the process running PROGRAM whose environment
says OMPI_COMM_WORLD_RANK=RANK, sends it SIGNAL (a name such as STOP or
KILL) and prints `signalled rank RANK at T`, T the time it did so (Unix
seconds). Exits 1 if the line or the process never shows up.
"""

import os
import signal
import sys
import time


def find_rank(program, rank):
    for pid in os.listdir("/proc"):
        if not pid.isdigit():
            continue
        try:
            with open(f"/proc/{pid}/cmdline", "rb") as f:
                argv = f.read().split(b"\0")
            if not argv or not argv[0].endswith(program.encode()):
                continue
            with open(f"/proc/{pid}/environ", "rb") as f:
                env = f.read().split(b"\0")
        except OSError:
            continue
        if f"OMPI_COMM_WORLD_RANK={rank}".encode() in env:
            return int(pid)
    return None


def main():
    program, rank, name, wait_file, pattern = sys.argv[1:6]
    timeout = float(sys.argv[6]) if len(sys.argv) > 6 else 60
    deadline = time.time() + timeout
    while time.time() < deadline:
        try:
            with open(wait_file) as f:
                if any(pattern in line for line in f):
                    break
        except OSError:
            pass
        time.sleep(0.05)
    else:
        print(f"signal_rank: no line with '{pattern}' in {wait_file}",
              file=sys.stderr)
        return 1
    pid = find_rank(program, rank)
    if pid is None:
        print(f"signal_rank: no {program} process of rank {rank}",
              file=sys.stderr)
        return 1
    os.kill(pid, getattr(signal, "SIG" + name))
    print(f"signalled rank {rank} at {time.time():.3f}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
