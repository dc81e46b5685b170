#!/usr/bin/env python3
"""Compares the measured saved activations of runs' --memory-report.

  activations.py compare BASE.txt RUN.txt [--within TOL]
  activations.py check RUN.txt --within TOL

Reads each rank's `memory rank R (stage S): measured peak ... activations A);
plan predicts ... activations P)` line and prints, per rank, the measured and
predicted activations of both runs, how much each fell and the ratio of the
falls: `rank R: measured A0 -> A1 MiB (-X%), predicted P0 -> P1 MiB (-Y%),
fall measured / predicted F`. With --within, exits 1 unless every ratio is
within TOL of 1, and prints `falls match` when they are.

`check` prints each rank's measured and predicted activations and their
ratio (`rank R: activations measured A MiB, predicted P MiB, measured /
predicted F`), exits 1 unless every ratio is within TOL of 1, and prints
`activations match within TOL` when they are.
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


def check(path, within):
    ranks = read(path)
    if not ranks:
        print("no memory report in %s" % path)
        return 1
    ok = True
    for r in sorted(ranks):
        measured, predicted = ranks[r]
        ratio = measured / predicted if predicted else float("inf")
        ok = ok and abs(ratio - 1) <= within
        print("rank %d: activations measured %.3f MiB, predicted %.3f MiB, "
              "measured / predicted %.2f" % (r, measured, predicted, ratio))
    if not ok:
        return 1
    print("activations match within %g" % within)
    return 0


def main():
    args = sys.argv[1:]
    if len(args) == 4 and args[0] == "check" and args[2] == "--within":
        return check(args[1], float(args[3]))
    within = None
    if len(args) == 5 and args[3] == "--within":
        within = float(args[4])
        args = args[:3]
    if len(args) != 3 or args[0] != "compare":
        print(__doc__)
        return 2
    base, run = read(args[1]), read(args[2])
    if not base or sorted(base) != sorted(run):
        print("ranks differ: %s, %s" % (sorted(base), sorted(run)))
        return 1
    ok = True
    for r in sorted(base):
        (m0, p0), (m1, p1) = base[r], run[r]
        ratio = (m0 - m1) / (p0 - p1) if p0 != p1 else float("inf")
        ok = ok and within is not None and abs(ratio - 1) <= within
        print("rank %d: measured %.3f -> %.3f MiB (-%.0f%%), predicted "
              "%.3f -> %.3f MiB (-%.0f%%), fall measured / predicted %.2f"
              % (r, m0, m1, 100 * (1 - m1 / m0), p0, p1, 100 * (1 - p1 / p0),
                 ratio))
    if within is None:
        return 0
    if not ok:
        return 1
    print("falls match within %g" % within)
    return 0


if __name__ == "__main__":
    sys.exit(main())
