#!/usr/bin/env python3
"""Imports every ONNX model under a folder and prints a table of results.

Usage: import-corpus.py [--tool PATH] [--dim NAME=SIZE ...] MODELS_DIR

Each model is imported with `autopar-opt MODEL --passes=canonicalize`. A row
says `ok` with the node and parameter counts, or `rejected` with the first
error, or `CRASH` when the tool died or exited with an unexpected code. The
last line counts them; the exit status is 1 when anything crashed.
"""

import argparse
import os
import subprocess
import sys


def import_model(tool, path, dims):
    cmd = [tool, path, "--passes=canonicalize"] + ["--dim=" + d for d in dims]
    try:
        result = subprocess.run(cmd, capture_output=True, text=True,
                                timeout=300)
    except subprocess.TimeoutExpired:
        return "CRASH", "timed out after 300 s"
    if result.returncode == 0:
        lines = result.stdout.splitlines()
        nodes = sum(1 for l in lines if " = " in l and not
                    l.lstrip().startswith(("param", "mesh")))
        params = sum(1 for l in lines if l.lstrip().startswith("param "))
        return "ok", "%d nodes, %d parameters" % (nodes, params)
    errors = [l for l in result.stderr.splitlines() if "error:" in l]
    if result.returncode == 1 and errors:
        # Drop the folder part of the path for a stable, short table.
        return "rejected", errors[0].replace(os.path.dirname(path) + "/", "")
    return "CRASH", "exit code %d: %s" % (result.returncode,
                                          result.stderr.strip()[-300:])


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--tool", default="autopar-opt")
    parser.add_argument("--dim", action="append", default=[])
    parser.add_argument("models")
    args = parser.parse_args()

    paths = []
    for root, _, files in os.walk(args.models):
        for name in files:
            if name.endswith(".onnx"):
                paths.append(os.path.join(root, name))
    paths.sort()
    counts = {"ok": 0, "rejected": 0, "CRASH": 0}
    for path in paths:
        status, detail = import_model(args.tool, path, args.dim)
        counts[status] += 1
        print("%-8s %-62s %s" % (status, os.path.relpath(path, args.models),
                                 detail))
    print("%d imported, %d rejected with a diagnostic, %d crashed" %
          (counts["ok"], counts["rejected"], counts["CRASH"]))
    return 1 if counts["CRASH"] else 0


if __name__ == "__main__":
    sys.exit(main())
