#!/usr/bin/env python3
"""Compares the CPU kernels of single ops with onnxruntime's.

  ort_ops.py --work DIR

For each case below, a small ONNX model (one op, or the op an importer
lowers) is written to DIR, run through autopar-opt and autopar-run --eval
and through onnxruntime on the same seeded inputs, and compared as
ort_compare.py compares whole models (max |out - ref| <= 1e-4 * max |ref|,
integers exactly). Prints `NAME: match (max rel err X)` or the problem per
case, then `N match, M failed`; exits 1 when one fails.
"""

import argparse
import os
import sys

import numpy as np
from onnx import TensorProto, helper, numpy_helper

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import ort_compare  # noqa: E402

F, I64, F16 = TensorProto.FLOAT, TensorProto.INT64, TensorProto.FLOAT16
NP = {F: np.float32, I64: np.int64, F16: np.float16}


def case(op, inputs, consts=(), outputs=1, opset=18, **attrs):
    """inputs: (name, elem, array) graph inputs; consts: (name, array)
    initializers; the op's inputs are both, in order, "" for absent."""
    return dict(op=op, inputs=list(inputs), consts=list(consts),
                outputs=outputs, opset=opset, attrs=attrs)


def cases(rng):
    def normal(*shape):
        return rng.standard_normal(shape).astype(np.float32)

    def ids(high, *shape):
        return rng.integers(0, high, shape).astype(np.int64)

    x3 = normal(2, 3, 5)
    x4 = normal(2, 8, 4, 6)
    logp = normal(3, 5, 2)
    target = ids(5, 3, 2)
    target[0, 1] = 1  # ignored below
    return [
        ("Pad_reflect", case("Pad", [("x", F, x3)],
                             [("pads", np.array([0, 1, 2, 0, 1, 3]))],
                             opset=13, mode="reflect")),
        ("Pad_edge", case("Pad", [("x", F, x3)],
                          [("pads", np.array([1, 0, 2, 0, 2, 1]))],
                          opset=13, mode="edge")),
        ("Pad_wrap", case("Pad", [("x", F, x3)],
                          [("pads", np.array([0, 2, 1, 0, 1, 4]))],
                          opset=19, mode="wrap")),
        ("Pad_axes_constant", case("Pad", [("x", F, x3)],
                                   [("pads", np.array([2, -1])),
                                    ("value", np.array(0.25, np.float32)),
                                    ("axes", np.array([-1]))])),
        ("Pad_opset10", case("Pad", [("x", F, x3)], opset=10,
                             pads=[0, 1, 0, 0, 2, 1], value=1.5)),
        ("GatherND", case("GatherND", [("d", F, x3),
                                       ("i", I64, np.array([[1, 2], [0, -1],
                                                            [1, 0]]))])),
        ("GatherND_batch", case("GatherND", [("d", F, x3),
                                             ("i", I64, ids(3, 2, 4, 1))],
                                batch_dims=1)),
        ("ScatterND_add", case("ScatterND",
                               [("d", F, x3),
                                ("i", I64, np.array([[1, 2], [0, 0], [1, 2]])),
                                ("u", F, normal(3, 5))], reduction="add")),
        ("ScatterND", case("ScatterND", [("d", F, x3),
                                         ("i", I64, np.array([[1], [0]])),
                                         ("u", F, normal(2, 3, 5))])),
        ("GatherElements", case("GatherElements",
                                [("d", F, x3), ("i", I64, ids(5, 2, 3, 4))],
                                axis=2)),
        ("ScatterElements_mul", case("ScatterElements",
                                     [("d", F, x3),
                                      ("i", I64, ids(3, 2, 2, 5)),
                                      ("u", F, normal(2, 2, 5))],
                                     axis=1, reduction="mul")),
        ("SpaceToDepth", case("SpaceToDepth", [("x", F, x4)], blocksize=2)),
        ("DepthToSpace_DCR", case("DepthToSpace", [("x", F, x4)],
                                  blocksize=2)),
        ("DepthToSpace_CRD", case("DepthToSpace", [("x", F, x4)],
                                  blocksize=2, mode="CRD")),
        ("OneHot", case("OneHot", [("i", I64, np.array([[0, 4, -1],
                                                        [2, 7, -5]]))],
                        [("depth", np.array(5)),
                         ("values", np.array([-1.0, 3.0], np.float32))],
                        axis=1)),
        ("EyeLike", case("EyeLike", [("x", F, normal(4, 5))], k=1)),
        ("NegativeLogLikelihoodLoss",
         case("NegativeLogLikelihoodLoss", [("x", F, logp), ("t", I64, target)],
              [("w", np.array([0.5, 1.0, 2.0, 0.25, 1.5], np.float32))],
              ignore_index=1)),
        ("SoftmaxCrossEntropyLoss",
         case("SoftmaxCrossEntropyLoss", [("x", F, logp), ("t", I64, target)],
              outputs=2, reduction="none")),
        ("GlobalMaxPool", case("GlobalMaxPool", [("x", F, x4)])),
        ("LpNormalization", case("LpNormalization", [("x", F, x4)], axis=1)),
        ("MeanVarianceNormalization",
         case("MeanVarianceNormalization", [("x", F, x4)])),
        ("CastLike", case("CastLike", [("x", F, 10 * normal(2, 3)),
                                       ("like", I64, np.array([0]))])),
    ]


def build(name, spec):
    graph_inputs, inits, names, feeds = [], [], [], {}
    for n, elem, value in spec["inputs"]:
        graph_inputs.append(helper.make_tensor_value_info(n, elem,
                                                          value.shape))
        names.append(n)
        feeds[n] = value
    for n, value in spec["consts"]:
        inits.append(numpy_helper.from_array(value, n))
        names.append(n)
    outs = ["y%d" % i for i in range(spec["outputs"])]
    node = helper.make_node(spec["op"], names, outs, name="op",
                            **spec["attrs"])
    graph = helper.make_graph(
        [node], name, graph_inputs,
        [helper.make_empty_tensor_value_info(o) for o in outs], inits)
    model = helper.make_model(
        graph, opset_imports=[helper.make_opsetid("", spec["opset"])])
    model.ir_version = 8
    return model, feeds


def main():
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--work", required=True)
    args = ap.parse_args()
    return ort_compare.run_model_cases(
        ((name,) + build(name, spec) for name, spec in cases(
            np.random.default_rng(22))), args.work)


if __name__ == "__main__":
    sys.exit(main())
