#!/usr/bin/env python3
"""The imported forms of com.microsoft MultiHeadAttention against
onnxruntime's kernel.

  ort_contrib_attention.py --work DIR

Each case is one MultiHeadAttention node on seeded inputs, imported onto
ONNX's Attention (frontend/OpImporters.cpp) and run with autopar-run
--eval; prints `NAME: match (max rel err X)` or what differs (floats within
1e-4 of the largest, ort_compare.py's rule), then `N match, K failed`.
"""

import argparse
import os
import sys

import numpy as np
from onnx import TensorProto, helper

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import ort_compare  # noqa: E402
from ort_quantized import model  # noqa: E402

F = TensorProto.FLOAT


def cases(rng):
    b, s, enc, heads, head = 2, 5, 7, 4, 8
    hidden = heads * head
    x = rng.normal(0, 1, (b, s, hidden)).astype(np.float32)
    out = []
    # Self-attention, Q, K and V 3-D.
    m = model("mha_3d", [
        helper.make_node("MultiHeadAttention", ["x", "x", "x"], ["y"],
                         domain="com.microsoft", num_heads=heads)],
        [("x", F, [b, s, hidden])], [("y", F, [b, s, hidden])], [],
        ms_opset=True)
    out.append(("mha_3d", m, {"x": x}))
    # Cross-attention with K and V split into heads (BNSH).
    k = rng.normal(0, 1, (b, heads, enc, head)).astype(np.float32)
    v = rng.normal(0, 1, (b, heads, enc, head)).astype(np.float32)
    m = model("mha_bnsh_kv", [
        helper.make_node("MultiHeadAttention", ["x", "k", "v"], ["y"],
                         domain="com.microsoft", num_heads=heads)],
        [("x", F, [b, s, hidden]), ("k", F, [b, heads, enc, head]),
         ("v", F, [b, heads, enc, head])],
        [("y", F, [b, s, hidden])], [], ms_opset=True)
    out.append(("mha_bnsh_kv", m, {"x": x, "k": k, "v": v}))
    return out


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--work", required=True)
    args = parser.parse_args()
    return ort_compare.run_model_cases(cases(np.random.default_rng(23)),
                                       args.work)


if __name__ == "__main__":
    sys.exit(main())
