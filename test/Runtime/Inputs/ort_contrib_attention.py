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
I32 = TensorProto.INT32


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
    # The same with a bias: onnxruntime adds only its query third (K and V
    # split into heads are taken as the projections, bias included).
    bias = rng.normal(0, 1, (3 * hidden,)).astype(np.float32)
    m = model("mha_bnsh_bias", [
        helper.make_node("MultiHeadAttention", ["x", "k", "v", "bias"], ["y"],
                         domain="com.microsoft", num_heads=heads)],
        [("x", F, [b, s, hidden]), ("k", F, [b, heads, enc, head]),
         ("v", F, [b, heads, enc, head]), ("bias", F, [3 * hidden])],
        [("y", F, [b, s, hidden])], [], ms_opset=True)
    out.append(("mha_bnsh_bias", m, {"x": x, "k": k, "v": v, "bias": bias}))
    # With a past (and the present outputs, without which onnxruntime's CPU
    # kernel leaves the past out), then with a bias too.
    past = 3
    pk = rng.normal(0, 1, (b, heads, past, head)).astype(np.float32)
    pv = rng.normal(0, 1, (b, heads, past, head)).astype(np.float32)
    for name, with_bias in (("mha_bnsh_past", False),
                            ("mha_bnsh_bias_past", True)):
        m = model(name, [
            helper.make_node(
                "MultiHeadAttention",
                ["x", "k", "v", "bias" if with_bias else "", "", "", "pk",
                 "pv"], ["y", "present_k", "present_v"],
                domain="com.microsoft", num_heads=heads)],
            [("x", F, [b, s, hidden]), ("k", F, [b, heads, enc, head]),
             ("v", F, [b, heads, enc, head]),
             ("pk", F, [b, heads, past, head]),
             ("pv", F, [b, heads, past, head])]
            + ([("bias", F, [3 * hidden])] if with_bias else []),
            [("y", F, [b, s, hidden]),
             ("present_k", F, [b, heads, past + enc, head]),
             ("present_v", F, [b, heads, past + enc, head])], [],
            ms_opset=True)
        feeds = {"x": x, "k": k, "v": v, "pk": pk, "pv": pv}
        if with_bias:
            feeds["bias"] = bias
        out.append((name, m, feeds))
    # The [3 * batch + 2] key padding mask: key lengths, then query and key
    # start offsets (which onnxruntime's CPU kernel does not read).
    k3 = rng.normal(0, 1, (b, enc, hidden)).astype(np.float32)
    v3 = rng.normal(0, 1, (b, enc, hidden)).astype(np.float32)
    mask = np.array([4, 7, 0, s, 2 * s, 0, 4, 11], dtype=np.int32)
    m = model("mha_mask_key_starts", [
        helper.make_node("MultiHeadAttention", ["x", "k", "v", "", "mask"],
                         ["y"], domain="com.microsoft", num_heads=heads)],
        [("x", F, [b, s, hidden]), ("k", F, [b, enc, hidden]),
         ("v", F, [b, enc, hidden]), ("mask", I32, [3 * b + 2])],
        [("y", F, [b, s, hidden])], [], ms_opset=True)
    out.append(("mha_mask_key_starts", m,
                {"x": x, "k": k3, "v": v3, "mask": mask}))
    return out


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--work", required=True)
    args = parser.parse_args()
    return ort_compare.run_model_cases(cases(np.random.default_rng(23)),
                                       args.work)


if __name__ == "__main__":
    sys.exit(main())
