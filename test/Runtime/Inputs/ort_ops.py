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
U8, I32 = TensorProto.UINT8, TensorProto.INT32
NP = {F: np.float32, I64: np.int64, F16: np.float16, U8: np.uint8,
      I32: np.int32}


def case(op, inputs, consts=(), outputs=1, opset=18, **attrs):
    """inputs: (name, elem, array) graph inputs; consts: (name, array)
    initializers; the op's inputs are both, in order; gaps: positions of
    the op's inputs left absent ("")."""
    return dict(op=op, inputs=list(inputs), consts=list(consts),
                outputs=outputs, opset=opset, attrs=attrs, gaps=[])


def cases(rng):
    def normal(*shape):
        return rng.standard_normal(shape).astype(np.float32)

    def ids(high, *shape):
        return rng.integers(0, high, shape).astype(np.int64)

    x3 = normal(2, 3, 5)
    x4 = normal(2, 8, 4, 6)
    img = normal(2, 3, 5, 7)
    seqs = normal(5, 3, 4)

    def resize(name, mode, scales=None, sizes=None, opset=19, x=img,
               roi=None, elem=F, **attrs):
        """Resize with constant scales or sizes (opset 10: X and scales
        only; opset 11: an empty roi when none is given)."""
        consts, gaps = [], []
        if roi is not None or opset == 11:
            consts.append(("roi", np.array(roi or [], np.float32)))
        elif opset > 10:
            gaps.append(1)
        if scales is not None:
            consts.append(("scales", np.array(scales, np.float32)))
        else:
            gaps.append(2)
            consts.append(("sizes", np.array(sizes, np.int64)))
        spec = case("Resize", [("x", elem, x)], consts, opset=opset,
                    mode=mode, **attrs)
        spec["gaps"] = gaps
        return ("Resize_" + name, spec)
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
        resize("nearest_half_pixel", "nearest", scales=[1, 1, 2.0, 1.5]),
        resize("nearest_floor_asymmetric", "nearest", sizes=[2, 3, 9, 4],
               coordinate_transformation_mode="asymmetric",
               nearest_mode="floor"),
        resize("nearest_ceil_align", "nearest", sizes=[2, 3, 8, 11],
               coordinate_transformation_mode="align_corners",
               nearest_mode="ceil"),
        resize("nearest_prefer_ceil", "nearest", scales=[1, 1, 0.6, 2.0],
               nearest_mode="round_prefer_ceil"),
        resize("nearest_3d", "nearest", scales=[1, 1.5, 2.6], x=x3,
               coordinate_transformation_mode="pytorch_half_pixel"),
        resize("linear_half_pixel", "linear", scales=[1, 1, 2.0, 0.5]),
        resize("linear_align_corners", "linear", sizes=[2, 3, 8, 10],
               coordinate_transformation_mode="align_corners"),
        resize("linear_pytorch", "linear", sizes=[2, 3, 1, 13],
               coordinate_transformation_mode="pytorch_half_pixel"),
        resize("linear_symmetric", "linear", scales=[1, 1, 1.7, 0.8],
               coordinate_transformation_mode="half_pixel_symmetric"),
        resize("linear_asymmetric_axes", "linear", scales=[2.5, 1.5],
               axes=[3, 2], coordinate_transformation_mode="asymmetric"),
        resize("linear_3d", "linear", sizes=[2, 5, 9], x=x3),
        resize("linear_crop", "linear", sizes=[2, 3, 6, 6],
               roi=[0, 0, 0.2, 0.1, 1, 1, 0.9, 1.3],
               coordinate_transformation_mode="tf_crop_and_resize",
               extrapolation_value=-3.0),
        resize("nearest_crop", "nearest", scales=[1, 1, 1.4, 0.6],
               roi=[0, 0, -0.2, 0.3, 1, 1, 0.7, 1.2],
               coordinate_transformation_mode="tf_crop_and_resize",
               extrapolation_value=5.0),
        resize("nearest_symmetric_down", "nearest", scales=[1, 1, 0.5, 0.5],
               coordinate_transformation_mode="half_pixel_symmetric"),
        resize("nearest_tf_half_pixel_for_nn", "nearest",
               scales=[1, 1, 1.5, 0.75], opset=11,
               coordinate_transformation_mode="tf_half_pixel_for_nn"),
        resize("cubic_crop_axes", "cubic", sizes=[7, 4], axes=[2, 3],
               roi=[0.1, -0.1, 0.8, 0.9],
               coordinate_transformation_mode="tf_crop_and_resize"),
        resize("linear_2d", "linear", scales=[0.5, 2.2], x=normal(6, 5)),
        resize("cubic_half_pixel", "cubic", scales=[1, 1, 2.0, 2.0]),
        resize("cubic_align_a", "cubic", sizes=[2, 3, 7, 5],
               coordinate_transformation_mode="align_corners",
               cubic_coeff_a=-0.5),
        resize("cubic_exclude_outside", "cubic", scales=[1, 1, 1.6, 0.7],
               exclude_outside=1),
        resize("cubic_asymmetric", "cubic", scales=[1, 1, 1.5, 3.0],
               coordinate_transformation_mode="asymmetric"),
        resize("nearest_u8", "nearest", scales=[1, 1, 1.5, 0.5],
               x=rng.integers(0, 256, (2, 3, 5, 7)).astype(np.uint8),
               elem=U8, nearest_mode="ceil"),
        resize("nearest_i32_crop", "nearest", sizes=[2, 3, 4, 9],
               x=rng.integers(-100, 100, (2, 3, 5, 7)).astype(np.int32),
               elem=I32, roi=[0, 0, 0.5, -0.3, 1, 1, 1.2, 0.9],
               coordinate_transformation_mode="tf_crop_and_resize",
               extrapolation_value=7.0),
        resize("linear_antialias_down", "linear", scales=[1, 1, 0.6, 0.4],
               antialias=1),
        resize("linear_antialias_up_down", "linear", sizes=[2, 3, 9, 3],
               antialias=1, coordinate_transformation_mode="align_corners"),
        resize("cubic_antialias_down", "cubic", scales=[1, 1, 0.5, 0.3],
               antialias=1),
        resize("cubic_antialias_exclude", "cubic", sizes=[2, 3, 3, 4],
               antialias=1, exclude_outside=1, cubic_coeff_a=-0.5),
        resize("linear_antialias_asymmetric", "linear",
               x=normal(2, 3, 9, 11), scales=[1, 1, 0.45, 0.7], antialias=1,
               coordinate_transformation_mode="asymmetric"),
        resize("linear_antialias_crop", "linear", sizes=[2, 3, 3, 3],
               antialias=1, roi=[0, 0, 0.2, -0.1, 1, 1, 0.8, 1.1],
               coordinate_transformation_mode="tf_crop_and_resize",
               extrapolation_value=2.0),
        resize("linear_antialias_3d", "linear", scales=[1, 0.5, 0.6], x=x3,
               antialias=1),
        resize("nearest_not_larger", "nearest", sizes=[8, 8], axes=[2, 3],
               keep_aspect_ratio_policy="not_larger"),
        resize("opset10_nearest", "nearest", scales=[1, 1, 2.0, 3.0],
               opset=10),
        resize("opset10_linear_down", "linear", scales=[1, 1, 0.5, 0.75],
               opset=10),
        resize("opset11_cubic", "cubic", scales=[1, 1, 1.4, 2.0], opset=11),
        ("Upsample_nearest", case("Upsample", [("x", F, img)],
                                  [("scales", np.array([1, 1, 2, 3],
                                                       np.float32))],
                                  opset=9)),
        ("Upsample_linear_opset7", case("Upsample", [("x", F, img)], opset=7,
                                        mode="linear",
                                        scales=[1.0, 1.0, 2.0, 1.5])),
        ("LpPool_p1", case("LpPool", [("x", F, img)], kernel_shape=[2, 3],
                           strides=[1, 2], p=1)),
        ("LpPool_p2_pads", case("LpPool", [("x", F, img)],
                                kernel_shape=[3, 3], pads=[1, 1, 1, 1],
                                strides=[2, 2])),
        ("LpPool_p3_dilated", case("LpPool", [("x", F, img)],
                                   kernel_shape=[2, 2], dilations=[2, 1],
                                   p=3, ceil_mode=1, strides=[2, 2])),
        ("LpPool_opset11", case("LpPool", [("x", F, img)], opset=11,
                                kernel_shape=[3, 2], p=2,
                                auto_pad="SAME_UPPER")),
        ("GlobalLpPool", case("GlobalLpPool", [("x", F, img)], p=3)),
        ("GlobalLpPool_p2", case("GlobalLpPool", [("x", F, x4)])),
        ("ReverseSequence_time_major",
         case("ReverseSequence", [("x", F, seqs),
                                  ("lens", I64, np.array([5, 0, 2]))],
              batch_axis=1, time_axis=0)),
        ("ReverseSequence_batch_major",
         case("ReverseSequence", [("x", F, seqs),
                                  ("lens", I64, np.array([1, 3, 2, 3, 0]))],
              batch_axis=0, time_axis=1)),
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
    for gap in sorted(spec["gaps"]):
        names.insert(gap, "")
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
