#!/usr/bin/env python3
"""Imports every ONNX model under a folder and prints a table of results.

Usage: import-corpus.py [--tool PATH] [--dim NAME=SIZE ...] MODELS_DIR

Each model is imported and fused (`autopar-opt MODEL --passes=...`, the
import-canonical pipeline without detect-layers). A row says `ok` with the
node count, the parameter count (elements of its weights, where static),
the ops autopar does not know (Opaque nodes, by op type) and the canonical
ops the fusions found (Attention, norms, activations, rotary, Linear); or
`rejected` with the first error; or `CRASH` when the tool died or exited
with an unexpected code. The last line counts them; the exit status is 1
when anything crashed.
"""

import argparse
import collections
import os
import re
import subprocess
import sys

PASSES = ("canonicalize,fuse-norms,fuse-activations,fuse-attention,"
          "fuse-rotary,fuse-linear,canonicalize")
# The canonical ops that fusions make of exported subgraphs.
FUSED = ("Attention", "LayerNormalization", "RMSNormalization", "Gelu",
         "Silu", "SwiGLU", "RotaryEmbedding", "Linear")
PARAM = re.compile(r"^\s*param %\S+: \w+\[([^\]]*)\]")
NODE = re.compile(r"^\s*%.* = (\w+)\(")
OPAQUE = re.compile(r'op_type = "([^"]+)"')


def describe(stdout):
    """Node count, parameter elements, Opaque op types, fused ops."""
    nodes, params = 0, 0
    opaque, fused = collections.Counter(), collections.Counter()
    for line in stdout.splitlines():
        m = PARAM.match(line)
        if m:
            count = 1
            for d in m.group(1).split(","):
                d = d.strip()
                count *= int(d) if d.isdigit() else 0
            params += count
            continue
        m = NODE.match(line)
        if not m:
            continue
        nodes += 1
        op = m.group(1)
        if op == "Opaque":
            t = OPAQUE.search(line)
            opaque[t.group(1) if t else "?"] += 1
        elif op in FUSED:
            fused[op] += 1

    def fmt(c):
        return ",".join("%s:%d" % kv for kv in sorted(c.items())) or "-"
    return "%d nodes, %d params, unknown %d (%s), fused %s" % (
        nodes, params, sum(opaque.values()), fmt(opaque), fmt(fused))


def import_model(tool, path, dims):
    cmd = [tool, path, "--passes=" + PASSES] + ["--dim=" + d for d in dims]
    try:
        result = subprocess.run(cmd, capture_output=True, text=True,
                                timeout=300)
    except subprocess.TimeoutExpired:
        return "CRASH", "timed out after 300 s"
    if result.returncode == 0:
        return "ok", describe(result.stdout)
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
