#!/usr/bin/env python3
"""Compares the losses two training runs printed.

  losses.py compare REF.txt RUN.txt [--first TOL] [--last TOL]

Each file holds autopar-run's `step N loss X ...` lines. The runs must have
the same steps; the first step's loss must be within --first (relative) of
the reference's, every later one within --last. Prints `losses match` with
the worst relative errors, or what differs (exit 1).
"""
import argparse
import re
import sys


def losses(path):
    steps = {}
    with open(path) as f:
        for line in f:
            m = re.match(r"step (\d+) loss (\S+) ", line)
            if m:
                steps[int(m.group(1))] = float(m.group(2))
    return steps


def main():
    p = argparse.ArgumentParser()
    p.add_argument("command", choices=["compare"])
    p.add_argument("ref")
    p.add_argument("run")
    p.add_argument("--first", type=float, default=1e-5)
    p.add_argument("--last", type=float, default=1e-4)
    a = p.parse_args()
    ref, run = losses(a.ref), losses(a.run)
    if not ref or sorted(ref) != sorted(run):
        print("steps differ: reference %s, run %s" % (sorted(ref), sorted(run)))
        return 1
    first = min(ref)
    worst = {}
    for step in sorted(ref):
        err = abs(run[step] - ref[step]) / max(abs(ref[step]), 1e-30)
        tol = a.first if step == first else a.last
        if err > tol:
            print("step %d: loss %.9g, reference %.9g (relative error %.3g > %g)"
                  % (step, run[step], ref[step], err, tol))
            return 1
        worst[step] = err
    print("losses match: %d steps, first %.3g, last %.3g"
          % (len(ref), worst[first], worst[max(ref)]))
    return 0


if __name__ == "__main__":
    sys.exit(main())
