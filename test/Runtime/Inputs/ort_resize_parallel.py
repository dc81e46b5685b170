#!/usr/bin/env python3
"""Runs a small CNN with Resize and LpPool planned over two ranks.

  ort_resize_parallel.py --work DIR --plan tp=2

The model (Conv, Relu, a linear Resize by [1, 1, 2, 2], LpPool, Conv; its
scales an initializer, so external data in the planned copy) is planned
with the pins as ort_compare.py plans whole models, run under mpirun, and
compared with onnxruntime. Prints `resize_cnn PINS: match (max rel err X)`
or the problem; exits 1 on a mismatch or failure.
"""

import argparse
import os
import sys

import numpy as np
from onnx import helper, numpy_helper, save

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import ort_compare  # noqa: E402


def build(path, rng):
    def weight(name, *shape):
        return numpy_helper.from_array(
            rng.standard_normal(shape).astype(np.float32), name)

    nodes = [
        helper.make_node("Conv", ["x", "w1"], ["c1"], pads=[1, 1, 1, 1]),
        helper.make_node("Relu", ["c1"], ["r1"]),
        helper.make_node("Resize", ["r1", "", "scales"], ["u"],
                         mode="linear"),
        helper.make_node("LpPool", ["u"], ["p"], kernel_shape=[2, 2],
                         strides=[2, 2]),
        helper.make_node("Conv", ["p", "w2"], ["y"], pads=[1, 1, 1, 1]),
    ]
    scales = numpy_helper.from_array(np.array([1, 1, 2, 2], np.float32),
                                     "scales")
    graph = helper.make_graph(
        nodes, "resize_cnn",
        [helper.make_tensor_value_info("x", 1, ["batch", 3, 6, 6])],
        [helper.make_tensor_value_info("y", 1, None)],
        [weight("w1", 8, 3, 3, 3), weight("w2", 4, 8, 3, 3), scales])
    model = helper.make_model(graph,
                              opset_imports=[helper.make_opsetid("", 19)])
    model.ir_version = 8
    save(model, path)


def main():
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--work", required=True)
    ap.add_argument("--plan", required=True)
    args = ap.parse_args()
    os.makedirs(args.work, exist_ok=True)
    rng = np.random.default_rng(22)
    path = os.path.join(args.work, "resize_cnn.onnx")
    build(path, rng)
    x = rng.standard_normal((2, 3, 6, 6)).astype(np.float32)
    names, refs = ort_compare.run_ort(path, {"x": x})
    try:
        outputs = ort_compare.run_parallel("resize_cnn", path, {"batch": 2},
                                           {"x": x}, args.work, args.plan,
                                           {})
    except (ort_compare.NotRun, ort_compare.Failure) as e:
        print("resize_cnn %s: %s" % (args.plan, e))
        return 1
    err, problems = ort_compare.compare(outputs, names, refs)
    if problems:
        print("resize_cnn %s: MISMATCH %s" % (args.plan, "; ".join(problems)))
        return 1
    print("resize_cnn %s: match (max rel err %.2g)" % (args.plan, err))
    return 0


if __name__ == "__main__":
    sys.exit(main())
