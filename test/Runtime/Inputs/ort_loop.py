#!/usr/bin/env python3
"""Runs models with a Loop and a Scan, which the importer unrolls, on the
CPU runtime and on onnxruntime, and compares them as ort_compare.py does.

  ort_loop.py WORK

Prints `NAME: match (max rel err X)` or `NAME: MISMATCH ...` per model.
"""

import os
import sys

import numpy as np
from onnx import TensorProto, helper, numpy_helper

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import ort_compare  # noqa: E402

F, I64, B = TensorProto.FLOAT, TensorProto.INT64, TensorProto.BOOL


def vi(name, elem, shape):
    return helper.make_tensor_value_info(name, elem, shape)


def loop_model(rng):
    """h = tanh(h @ W + x) for at most 5 steps, stopping after step 3
    (iter < 3), every h stacked; W is a weight."""
    body = helper.make_graph(
        [helper.make_node("Constant", [], ["three"],
                          value=helper.make_tensor("t", I64, [], [3])),
         helper.make_node("Less", ["i", "three"], ["c_out"]),
         helper.make_node("MatMul", ["h_in", "w"], ["hw"]),
         helper.make_node("Add", ["hw", "x"], ["pre"]),
         helper.make_node("Tanh", ["pre"], ["h_out"])],
        "body", [vi("i", I64, []), vi("c_in", B, []), vi("h_in", F, [2, 4])],
        [vi("c_out", B, []), vi("h_out", F, [2, 4]), vi("h_out", F, [2, 4])])
    w = numpy_helper.from_array(
        rng.standard_normal((4, 4)).astype(np.float32), "w")
    graph = helper.make_graph(
        [helper.make_node("Loop", ["m", "go", "h0"], ["h", "hs"], body=body)],
        "loop", [vi("x", F, [2, 4]), vi("h0", F, [2, 4])],
        [vi("h", F, [2, 4]), vi("hs", F, [4, 2, 4])],
        [w, helper.make_tensor("m", I64, [], [5]),
         helper.make_tensor("go", B, [], [1])])
    return graph, ["x", "h0"]


def scan_model(rng):
    """A running sum over the rows of xs read backwards, and each row
    squared, stacked backwards along axis 1."""
    body = helper.make_graph(
        [helper.make_node("Add", ["s_in", "x_t"], ["s_out"]),
         helper.make_node("Mul", ["x_t", "x_t"], ["y_t"])],
        "body", [vi("s_in", F, [4]), vi("x_t", F, [4])],
        [vi("s_out", F, [4]), vi("y_t", F, [4])])
    graph = helper.make_graph(
        [helper.make_node("Scan", ["s", "xs"], ["total", "ys"], body=body,
                          num_scan_inputs=1, scan_input_directions=[1],
                          scan_output_axes=[1], scan_output_directions=[1])],
        "scan", [vi("s", F, [4]), vi("xs", F, [3, 4])],
        [vi("total", F, [4]), vi("ys", F, [4, 3])])
    return graph, ["s", "xs"]


def main(argv):
    work = argv[1]
    os.makedirs(work, exist_ok=True)
    for name, build in [("loop", loop_model), ("scan", scan_model)]:
        rng = np.random.default_rng(7)
        graph, input_names = build(rng)
        model = helper.make_model(
            graph, opset_imports=[helper.make_opsetid("", 17)])
        model.ir_version = 8
        path = os.path.join(work, name + ".onnx")
        with open(path, "wb") as f:
            f.write(model.SerializeToString())
        shapes = {v.name: [d.dim_value for d in
                           v.type.tensor_type.shape.dim]
                  for v in graph.input}
        inputs = {n: rng.standard_normal(shapes[n]).astype(np.float32)
                  for n in input_names}
        try:
            outputs = ort_compare.run_autopar(name, path, {}, inputs,
                                              work, "")
            ref_names, refs = ort_compare.run_ort(path, inputs)
            worst, problems = ort_compare.compare(outputs, ref_names, refs)
        except Exception as e:
            print("%s: ERROR: %s" % (name, e))
            continue
        if problems:
            print("%s: MISMATCH %s" % (name, "; ".join(problems)))
        else:
            print("%s: match (max rel err %.2g)" % (name, worst))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
