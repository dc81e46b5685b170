#!/usr/bin/env python3
"""The CPU runtime's quantized kernels against onnxruntime's.

  ort_quantized.py --work DIR

Writes one small model per case below (seeded codes, scales and zero
points as initializers), runs it with autopar-run --eval and with
onnxruntime (ort_compare.py's run_autopar, run_ort and compare: integer
outputs must be equal, float ones within 1e-4 of the largest), and prints
`NAME: match (max rel err X)` or what differs, then `N match, K failed`.
Exits 1 when a case fails.
"""

import argparse
import os
import sys

import numpy as np
from onnx import TensorProto, helper

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import ort_compare  # noqa: E402

F, U8, I8, I64 = (TensorProto.FLOAT, TensorProto.UINT8, TensorProto.INT8,
                  TensorProto.INT64)
NP = {F: np.float32, U8: np.uint8, I8: np.int8, I64: np.int64}


def init(name, elem, array):
    return helper.make_tensor(name, elem, array.shape,
                              array.astype(NP[elem]).flatten().tolist())


def model(name, nodes, inputs, outputs, inits, ms_opset=False):
    graph = helper.make_graph(
        nodes, name,
        [helper.make_tensor_value_info(n, e, s) for n, e, s in inputs],
        [helper.make_tensor_value_info(n, e, s) for n, e, s in outputs],
        inits)
    opsets = [helper.make_opsetid("", 21)]
    if ms_opset:
        opsets.append(helper.make_opsetid("com.microsoft", 1))
    m = helper.make_model(graph, opset_imports=opsets)
    m.ir_version = 10
    return m


def cases(rng):
    """(name, model, inputs) of each case."""
    out = []
    # Per-axis QuantizeLinear then DequantizeLinear; blocked dequantization.
    x = rng.normal(0, 2, (4, 8)).astype(np.float32)
    s = rng.uniform(0.02, 0.1, 8).astype(np.float32)
    z = rng.integers(100, 156, 8)
    bs = rng.uniform(0.02, 0.1, (4, 2)).astype(np.float32)
    bz = rng.integers(-8, 8, (4, 2))
    m = model("qdq", [
        helper.make_node("QuantizeLinear", ["x", "s", "z"], ["q"], axis=1),
        helper.make_node("DequantizeLinear", ["q", "s", "z"], ["y"], axis=1),
        helper.make_node("QuantizeLinear", ["x", "bs", "bz"], ["bq"], axis=1,
                         block_size=4),
        helper.make_node("DequantizeLinear", ["bq", "bs", "bz"], ["by"],
                         axis=1, block_size=4)],
        [("x", F, [4, 8])],
        [("q", U8, [4, 8]), ("y", F, [4, 8]), ("bq", I8, [4, 8]),
         ("by", F, [4, 8])],
        [init("s", F, s), init("z", U8, z), init("bs", F, bs),
         init("bz", I8, bz)])
    out.append(("qdq", m, {"x": x}))
    # DynamicQuantizeLinear.
    x = rng.normal(0.5, 1, (3, 5)).astype(np.float32)
    m = model("dynamic_quantize", [
        helper.make_node("DynamicQuantizeLinear", ["x"], ["y", "s", "z"])],
        [("x", F, [3, 5])], [("y", U8, [3, 5]), ("s", F, []), ("z", U8, [])],
        [])
    out.append(("dynamic_quantize", m, {"x": x}))
    # MatMulInteger: batched u8 A, i8 B with a zero point per column.
    a = rng.integers(0, 256, (2, 3, 4)).astype(np.uint8)
    b = rng.integers(-128, 128, (4, 5))
    bz = rng.integers(-4, 4, 5)
    m = model("matmul_integer", [
        helper.make_node("MatMulInteger", ["a", "b", "az", "bz"], ["y"])],
        [("a", U8, [2, 3, 4])], [("y", TensorProto.INT32, [2, 3, 5])],
        [init("b", I8, b), init("az", U8, np.array(7)), init("bz", I8, bz)])
    out.append(("matmul_integer", m, {"a": a}))
    # QLinearMatMul with per-tensor scales.
    a = rng.integers(0, 256, (3, 16)).astype(np.uint8)
    b = rng.integers(0, 256, (16, 6))
    m = model("qlinear_matmul", [
        helper.make_node("QLinearMatMul",
                         ["a", "as", "az", "b", "bs", "bz", "ys", "yz"],
                         ["y"])],
        [("a", U8, [3, 16])], [("y", U8, [3, 6])],
        [init("as", F, np.array(0.013)), init("az", U8, np.array(120)),
         init("b", U8, b), init("bs", F, np.array(0.021)),
         init("bz", U8, np.array(131)), init("ys", F, np.array(0.37)),
         init("yz", U8, np.array(128))])
    out.append(("qlinear_matmul", m, {"a": a}))
    # ConvInteger: u8 image, i8 weights, padding, a stride and 2 groups
    # (onnxruntime's CPU kernel takes per-tensor zero points only).
    img = rng.integers(0, 256, (2, 4, 7, 7)).astype(np.uint8)
    w = rng.integers(-128, 128, (6, 2, 3, 3))
    m = model("conv_integer", [
        helper.make_node("ConvInteger", ["x", "w", "xz", "wz"], ["y"],
                         pads=[1, 1, 1, 1], strides=[2, 1], group=2)],
        [("x", U8, [2, 4, 7, 7])], [("y", TensorProto.INT32, [2, 6, 4, 7])],
        [init("w", I8, w), init("xz", U8, np.array(9)),
         init("wz", I8, np.array(-2))])
    out.append(("conv_integer", m, {"x": img}))
    # QLinearConv with per-channel weight scales and an i32 bias.
    w = rng.integers(-128, 128, (5, 4, 3, 3))
    ws = rng.uniform(0.002, 0.01, 5).astype(np.float32)
    bias = rng.integers(-500, 500, 5)
    m = model("qlinear_conv", [
        helper.make_node("QLinearConv",
                         ["x", "xs", "xz", "w", "ws", "wz", "ys", "yz", "b"],
                         ["y"], pads=[1, 1, 1, 1])],
        [("x", U8, [2, 4, 7, 7])], [("y", U8, [2, 5, 7, 7])],
        [init("xs", F, np.array(0.02)), init("xz", U8, np.array(128)),
         init("w", I8, w), init("ws", F, ws),
         init("wz", I8, np.zeros(5, dtype=np.int8)),
         init("ys", F, np.array(0.05)), init("yz", U8, np.array(100)),
         helper.make_tensor("b", TensorProto.INT32, [5],
                            bias.astype(np.int32).tolist())])
    out.append(("qlinear_conv", m, {"x": img}))
    # MatMulNBits, 4 bits, blocks of 32, packed zero points and a bias; K
    # not a multiple of the block (the last block is partial).
    k, n, block = 80, 12, 32
    blocks = (k + block - 1) // block
    codes = rng.integers(0, 256, (n, blocks, block // 2))
    scales = rng.uniform(0.01, 0.05, n * blocks).astype(np.float32)
    zeros = rng.integers(0, 256, n * ((blocks * 4 + 7) // 8))
    bias = rng.normal(0, 1, n).astype(np.float32)
    x = rng.normal(0, 1, (2, 5, k)).astype(np.float32)
    m = model("matmul_nbits", [
        helper.make_node("MatMulNBits", ["x", "b", "s", "z", "", "bias"],
                         ["y"], domain="com.microsoft", K=k, N=n, bits=4,
                         block_size=block)],
        [("x", F, [2, 5, k])], [("y", F, [2, 5, n])],
        [init("b", U8, codes), init("s", F, scales), init("z", U8, zeros),
         init("bias", F, bias)], ms_opset=True)
    out.append(("matmul_nbits", m, {"x": x}))
    # MatMulNBits, 8 bits, no zero points (the default, 128).
    codes = rng.integers(0, 256, (n, blocks, block))
    m = model("matmul_nbits_8bit", [
        helper.make_node("MatMulNBits", ["x", "b", "s"], ["y"],
                         domain="com.microsoft", K=k, N=n, bits=8,
                         block_size=block)],
        [("x", F, [2, 5, k])], [("y", F, [2, 5, n])],
        [init("b", U8, codes), init("s", F, scales)], ms_opset=True)
    out.append(("matmul_nbits_8bit", m, {"x": x}))
    # GatherBlockQuantized: a 4-bit table of 10 rows of 64, blocks of 32.
    table = rng.integers(0, 256, (10, 32))
    scales = rng.uniform(0.01, 0.05, (10, 2)).astype(np.float32)
    zeros = rng.integers(0, 256, (10, 1))
    ids = np.array([[3, 0, 9], [1, 1, 7]], dtype=np.int64)
    m = model("gather_block_quantized", [
        helper.make_node("GatherBlockQuantized", ["t", "ids", "s", "z"],
                         ["y"], domain="com.microsoft", block_size=32,
                         bits=4)],
        [("ids", I64, [2, 3])], [("y", F, [2, 3, 64])],
        [init("t", U8, table), init("s", F, scales), init("z", U8, zeros)],
        ms_opset=True)
    out.append(("gather_block_quantized", m, {"ids": ids}))
    return out


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--work", required=True)
    args = parser.parse_args()
    return ort_compare.run_model_cases(cases(np.random.default_rng(22)),
                                       args.work)


if __name__ == "__main__":
    sys.exit(main())
