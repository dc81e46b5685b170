#!/usr/bin/env python3
"""Compares the measured saved activations of two runs' --memory-report.

  activations.py compare BASE.txt RUN.txt

Reads each rank's `memory rank R (stage S): measured peak ... activations A);
plan predicts ... activations P)` line and prints, per rank, the measured and
predicted activations of both runs and how much each fell:
`rank R: measured A0 -> A1 MiB (-X%), predicted P0 -> P1 MiB (-Y%)`.
"""

import re
import sys

LINE = re.compile(r"memory rank (\d+) .*?activations ([0-9.]+)\); plan "
                  r"predicts .*?activations ([0-9.]+)\)")


def read(path):
    ranks = {}
    with open(path) as f:
        for line in f:
            m = LINE.search(line)
            if m:
                ranks[int(m.group(1))] = (float(m.group(2)), float(m.group(3)))
    return ranks


def main():
    if len(sys.argv) != 4 or sys.argv[1] != "compare":
        print(__doc__)
        return 2
    base, run = read(sys.argv[2]), read(sys.argv[3])
    if not base or sorted(base) != sorted(run):
        print("ranks differ: %s, %s" % (sorted(base), sorted(run)))
        return 1
    for r in sorted(base):
        (m0, p0), (m1, p1) = base[r], run[r]
        print("rank %d: measured %.3f -> %.3f MiB (-%.0f%%), predicted "
              "%.3f -> %.3f MiB (-%.0f%%)"
              % (r, m0, m1, 100 * (1 - m1 / m0), p0, p1, 100 * (1 - p1 / p0)))
    return 0


if __name__ == "__main__":
    sys.exit(main())
