#!/usr/bin/python3
# Every operator of ONNX's default domain, opsets 7 to 24, as a one-node
# model, with the types its outputs must have. Used two ways:
#
#   onnx_ops.py --write DIR   writes DIR/<Op>.onnx and DIR/<Op>.check, a
#                             FileCheck file for `autopar-opt DIR/<Op>.onnx`
#                             (test/Frontend/onnx-ops.test runs them all);
#   onnx_ops.py --table       prints docs/Frontend.md's operator table: how
#                             autopar imports each op (frontend/OnnxOps.def).
#
# Each output of the op goes through an Identity named out<i>, so the check
# is one line per output: `%out0 = Identity(...) : f32[2, n]`. The expected
# types are ONNX's own (libonnx 1.12's strict shape inference, run here) for
# ops that release knows; for the ops newer than it (opsets 18 to 24) they
# are written below, from the operator specs. Needs Debian's python3-onnx.
"""One-node models of every ONNX operator, and the import table."""

import argparse
import os
import re
import sys

from onnx import TensorProto, helper, shape_inference

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.join(HERE, "..", "..", "..")

F, D, H, BF = (TensorProto.FLOAT, TensorProto.DOUBLE, TensorProto.FLOAT16,
               TensorProto.BFLOAT16)
I64, I32, I8, U8, B, S = (TensorProto.INT64, TensorProto.INT32,
                          TensorProto.INT8, TensorProto.UINT8,
                          TensorProto.BOOL, TensorProto.STRING)
ELEM = {F: "f32", D: "f64", H: "f16", BF: "bf16", I64: "i64", I32: "i32",
        I8: "i8", U8: "u8", B: "bool"}


def x(name="x", elem=F, shape=(2, "n", 4)):
    """A graph input."""
    return (name, elem, list(shape), None)


def seq(name="s"):
    """A sequence of two f32[2, n, 4] tensors: SequenceConstruct of graph
    inputs <name>0 and <name>1 (a sequence cannot be a graph input)."""
    return (name, "sequence", [2, "n", 4], None)


def opt(name="o"):
    """An optional f32[2, n, 4] tensor: Optional of graph input <name>0."""
    return (name, "optional", [2, "n", 4], None)


def c(name, elem, values, shape=None):
    """A constant input (an initializer with values)."""
    if shape is None:
        shape = [len(values)] if isinstance(values, list) else []
    return (name, elem, list(shape), values if isinstance(values, list)
            else [values])


def op(inputs, outputs=1, opset=17, expect=None, declare=False, read=None,
       checks=(), **attrs):
    """inputs: list of x()/c()/seq()/opt() (None: an absent optional
    input); expect: the output types for ops libonnx 1.12 does not know (or
    of what `read` makes of them), as autopar prints them; declare: the
    model declares its output types (value_info); read: (op, attrs) nodes
    that turn a sequence output into a tensor before its Identity; checks:
    more CHECK lines, on the IR the op is lowered to (one that names an
    output's line, `%out0 = `, takes the place of its type check)."""
    return dict(inputs=inputs, outputs=outputs, opset=opset, expect=expect,
                declare=declare, read=read or [], checks=list(checks),
                attrs=attrs)


X4 = x("x", F, [2, 3, 8, 8])
W4 = c("w", F, [0.0] * (4 * 3 * 3 * 3), [4, 3, 3, 3])
UNARY = ["Abs", "Acos", "Acosh", "Asin", "Asinh", "Atan", "Atanh", "Ceil",
         "Cos", "Cosh", "Elu", "Erf", "Exp", "Floor", "HardSigmoid",
         "HardSwish", "LeakyRelu", "Log", "Neg", "Reciprocal", "Relu",
         "Round", "Selu", "Sigmoid", "Sign", "Sin", "Sinh", "Softplus",
         "Softsign", "Sqrt", "Tan", "Tanh", "ThresholdedRelu", "Celu",
         "Shrink", "Identity", "Softmax", "LogSoftmax", "Hardmax",
         "LpNormalization"]
BINARY = ["Add", "Sub", "Mul", "Div", "Pow", "Max", "Min", "Mean", "Sum"]
COMPARE = ["Equal", "Less", "Greater", "GreaterOrEqual", "LessOrEqual"]
REDUCE = ["ReduceL1", "ReduceL2", "ReduceLogSum", "ReduceLogSumExp",
          "ReduceMax", "ReduceMean", "ReduceMin", "ReduceProd", "ReduceSum",
          "ReduceSumSquare"]


LOOP_BODY = helper.make_graph(
    [helper.make_node("Identity", ["cond_in"], ["cond_out"]),
     helper.make_node("Add", ["v_in", "v_in"], ["v_out"])],
    "body",
    [helper.make_tensor_value_info("i", I64, []),
     helper.make_tensor_value_info("cond_in", B, []),
     helper.make_tensor_value_info("v_in", F, [2, 4])],
    [helper.make_tensor_value_info("cond_out", B, []),
     helper.make_tensor_value_info("v_out", F, [2, 4])])
SCAN_BODY = helper.make_graph(
    [helper.make_node("Add", ["s_in", "x_t"], ["s_out"]),
     helper.make_node("Mul", ["x_t", "x_t"], ["y_t"])],
    "body",
    [helper.make_tensor_value_info("s_in", F, [4]),
     helper.make_tensor_value_info("x_t", F, [4])],
    [helper.make_tensor_value_info("s_out", F, [4]),
     helper.make_tensor_value_info("y_t", F, [4])])
MAP_BODY = helper.make_graph(
    [helper.make_node("Relu", ["e"], ["r"])], "body",
    [helper.make_tensor_value_info("e", F, None)],
    [helper.make_tensor_value_info("r", F, None)])
# A sequence output read as a tensor: its elements stacked on a new axis 0.
STACK = [("ConcatFromSequence", {"axis": 0, "new_axis": 1})]

SPECS = {}
for name in UNARY:
    SPECS[name] = op([x()])
for name in BINARY:
    SPECS[name] = op([x(), x("y", F, [4])])
for name in COMPARE:
    SPECS[name] = op([x(), x("y", F, [4])])
for name in REDUCE:
    SPECS[name] = op([x()], axes=[1], keepdims=0)
SPECS["ReduceSum"] = op([x(), c("axes", I64, [1])], keepdims=0)
for name in ["And", "Or", "Xor"]:
    SPECS[name] = op([x("a", B, [2, "n"]), x("b", B, [2, "n"])])
SPECS.update({
    "Not": op([x("a", B, [2, "n"])]),
    "IsNaN": op([x()]),
    "IsInf": op([x()]),
    "PRelu": op([x(), x("slope", F, [4])]),
    "Mod": op([x("a", I64, [2, "n"]), x("b", I64, [2, "n"])]),
    "BitShift": op([x("a", U8, [2, 3]), x("b", U8, [2, 3])],
                   direction="LEFT"),
    "Clip": op([x(), c("lo", F, 0.0), c("hi", F, 6.0)]),
    "Cast": op([x()], to=TensorProto.INT32),
    "CastLike": op([x(), x("like", I64, [1])]),
    "Where": op([x("cond", B, [2, "n", 4]), x(), x("y", F, [4])]),
    "ArgMax": op([x()], axis=1, keepdims=0),
    "ArgMin": op([x()], axis=-1),
    "CumSum": op([x(), c("axis", I64, 1)]),
    "Dropout": op([x()], outputs=2),
    # ONNX 1.12 leaves the sizes of these unknown; autopar knows them.
    "Einsum": op([x("a", F, [2, 3]), x("b", F, [3, "n"])],
                 equation="ij,jk->ik", expect=["f32[2, n]"]),
    "MatMul": op([x(), x("w", F, [4, 5])]),
    "Gemm": op([x("a", F, [2, 3]), x("b", F, [3, 5]), x("bias", F, [5])]),
    "MatMulInteger": op([x("a", U8, [2, 3]), x("b", U8, [3, 5])]),
    "QLinearMatMul": op([x("a", U8, [2, 3]), c("as", F, 0.1),
                         c("az", U8, 0), x("b", U8, [3, 5]), c("bs", F, 0.1),
                         c("bz", U8, 0), c("ys", F, 0.1), c("yz", U8, 0)]),
    "QuantizeLinear": op([x(), c("s", F, 0.1), c("z", U8, 0)]),
    "DequantizeLinear": op([x("q", U8, [2, "n"]), c("s", F, 0.1),
                            c("z", U8, 0)]),
    "DynamicQuantizeLinear": op([x()], outputs=3),
    "ConvInteger": op([x("q", U8, [1, 3, 8, 8]),
                       c("w", U8, [0] * 108, [4, 3, 3, 3])]),
    "QLinearConv": op([x("q", U8, [1, 3, 8, 8]), c("xs", F, 0.1),
                       c("xz", U8, 0), c("w", U8, [0] * 108, [4, 3, 3, 3]),
                       c("ws", F, 0.1), c("wz", U8, 0), c("ys", F, 0.1),
                       c("yz", U8, 0)]),
    "LayerNormalization": op([x(), x("g", F, [4]), x("b", F, [4])]),
    "BatchNormalization": op([X4] + [x(n, F, [3]) for n in "sbmv"]),
    "InstanceNormalization": op([X4, x("s", F, [3]), x("b", F, [3])]),
    "LRN": op([X4], size=3),
    "Conv": op([X4, W4], pads=[1, 1, 1, 1]),
    "ConvTranspose": op([X4, c("w", F, [0.0] * 108, [3, 4, 3, 3])],
                        strides=[2, 2]),
    "MaxPool": op([X4], kernel_shape=[2, 2], strides=[2, 2]),
    "AveragePool": op([X4], kernel_shape=[2, 2], strides=[2, 2]),
    "LpPool": op([X4], kernel_shape=[2, 2], strides=[2, 2]),
    "GlobalAveragePool": op([X4]),
    "GlobalMaxPool": op([X4]),
    # The default axes [0, 2, 3] need a 4-D input.
    "MeanVarianceNormalization": op([X4]),
    "GlobalLpPool": op([X4]),
    "MaxRoiPool": op([X4, c("rois", F, [0.0, 0, 0, 4, 4], [1, 5])],
                     pooled_shape=[2, 2]),
    "RoiAlign": op([X4, c("rois", F, [0.0, 0, 4, 4], [1, 4]),
                    c("bi", I64, [0])], output_height=2, output_width=2),
    "MaxUnpool": op([x("x", F, [2, 3, 4, 4]), x("i", I64, [2, 3, 4, 4])],
                    kernel_shape=[2, 2], strides=[2, 2]),
    "Resize": op([X4, None, c("scales", F, [1.0, 1.0, 2.0, 2.0])]),
    "Upsample": op([X4, c("scales", F, [1.0, 1.0, 2.0, 2.0])], opset=9),
    "GridSample": op([X4, x("grid", F, [2, 6, 6, 2])]),
    "DepthToSpace": op([x("x", F, [2, 8, 4, 4])], blocksize=2),
    "SpaceToDepth": op([X4], blocksize=2),
    "Constant": op([], value=helper.make_tensor("v", F, [2], [1.0, 2.0])),
    "ConstantOfShape": op([c("shape", I64, [2, 3])]),
    "EyeLike": op([x("x", F, [3, 4])]),
    "Range": op([c("a", I64, 0), c("b", I64, 5), c("d", I64, 1)]),
    "Shape": op([x()]),
    "Size": op([x()]),
    "Reshape": op([x(), c("shape", I64, [0, -1])], expect=["f32[2, 4*n]"]),
    "Flatten": op([x()], axis=1, expect=["f32[2, 4*n]"]),
    "Transpose": op([x()], perm=[2, 0, 1]),
    "Concat": op([x(), x("y", F, [2, "n", 3])], axis=2),
    "Split": op([x(), c("split", I64, [1, 3])], outputs=2, axis=2),
    "Slice": op([x(), c("s", I64, [1]), c("e", I64, [3]), c("a", I64, [2])]),
    "Gather": op([x(), x("i", I64, [5])], axis=0),
    "GatherElements": op([x(), x("i", I64, [2, "n", 2])], axis=2),
    "GatherND": op([x(), x("i", I64, [5, 2])]),
    "ScatterElements": op([x(), x("i", I64, [2, "n", 2]),
                           x("u", F, [2, "n", 2])], axis=2),
    "Scatter": op([x(), x("i", I64, [2, "n", 2]), x("u", F, [2, "n", 2])],
                  opset=10, axis=2),
    "ScatterND": op([x(), x("i", I64, [5, 2]), x("u", F, [5, 4])]),
    "Squeeze": op([x("x", F, [2, 1, 4]), c("axes", I64, [1])]),
    "Unsqueeze": op([x(), c("axes", I64, [0])]),
    "Expand": op([x("x", F, [1, 4]), c("shape", I64, [3, 1])]),
    "Tile": op([x(), c("r", I64, [1, 2, 1])], expect=["f32[2, 2*n, 4]"]),
    "Pad": op([x(), c("pads", I64, [0, 0, 1, 0, 0, 1])]),
    "TopK": op([x(), c("k", I64, [2])], outputs=2),
    "Trilu": op([x("x", F, [4, "n"])]),
    # libonnx 1.12 gives Compress no shape: the model declares it.
    "Compress": op([x(), c("cond", B, [True, False])], axis=0, declare=True,
                   expect=["f32[?, n, 4]"]),
    "NonZero": op([x()]),
    "Unique": op([x("x", F, [6])], outputs=4),
    "OneHot": op([x("i", I64, [2, "n"]), c("depth", I64, [5]),
                  c("values", F, [0.0, 1.0])]),
    "ReverseSequence": op([x("x", F, [4, 2, 3]), c("lens", I64, [1, 2])],
                          batch_axis=1, time_axis=0),
    "Det": op([x("x", F, [2, 3, 3])]),
    "NonMaxSuppression": op([x("b", F, [1, 6, 4]), x("s", F, [1, 1, 6])]),
    "Multinomial": op([x("x", F, [2, 5])], sample_size=3),
    "Bernoulli": op([x()]),
    "RandomNormal": op([], shape=[2, 3]),
    "RandomUniform": op([], shape=[2, 3]),
    "RandomNormalLike": op([x()]),
    "RandomUniformLike": op([x()]),
    "DFT": op([x("x", F, [2, 8, 1])]),
    "STFT": op([x("x", F, [1, 64, 1]), c("step", I64, 8), None,
                c("len", I64, 16)]),
    "HannWindow": op([c("size", I64, 16)]),
    "HammingWindow": op([c("size", I64, 16)]),
    "BlackmanWindow": op([c("size", I64, 16)]),
    "MelWeightMatrix": op([c("bins", I64, 8), c("dft", I64, 64),
                           c("rate", I64, 16000), c("lo", F, 0.0),
                           c("hi", F, 8000.0)]),
    "SoftmaxCrossEntropyLoss": op([x("s", F, [2, 5]), x("t", I64, [2])],
                                  outputs=2),
    "NegativeLogLikelihoodLoss": op([x("s", F, [2, 5]), x("t", I64, [2])]),
    "GRU": op([x("x", F, [5, 2, 4]), c("w", F, [0.0] * 72, [1, 18, 4]),
               c("r", F, [0.0] * 108, [1, 18, 6])], outputs=2,
              hidden_size=6),
    "LSTM": op([x("x", F, [5, 2, 4]), c("w", F, [0.0] * 96, [2, 12, 4]),
                c("r", F, [0.0] * 72, [2, 12, 3])], outputs=3,
               hidden_size=3, direction="bidirectional"),
    "RNN": op([x("x", F, [5, 2, 4]), c("w", F, [0.0] * 12, [1, 3, 4]),
               c("r", F, [0.0] * 9, [1, 3, 3])], outputs=2, hidden_size=3),
    "StringNormalizer": op([x("s", S, [3])], declare=True,
                           expect=["unsupported"]),
    "TfIdfVectorizer": op([x("i", I64, [2, 6])], mode="TF", min_gram_length=1,
                          max_gram_length=1, max_skip_count=0,
                          ngram_counts=[0], ngram_indexes=[0, 1],
                          pool_int64s=[3, 5]),
    # Control flow: If has its own test (if-constant.pbtxt); Loop and Scan
    # are unrolled here (loop-unroll.pbtxt, scan-unroll.pbtxt for more).
    "If": "control",
    "Loop": op([c("M", I64, 3), c("cond", B, True), x("v", F, [2, 4])],
               body=LOOP_BODY, expect=["f32[2, 4]"],
               checks=["CHECK-COUNT-3: Add(",
                       "CHECK: %out0 = Identity(%{{.*}}) : f32[2, 4]"]),
    "Scan": op([x("s", F, [4]), x("xs", F, [3, 4])], outputs=2,
               body=SCAN_BODY, num_scan_inputs=1,
               checks=["CHECK-COUNT-3: Gather(%xs"]),
    # Sequences and optionals are held as their tensors (sequence-ops.pbtxt
    # and sequence-errors.test for more).
    "SplitToSequence": op([x(), c("split", I64, [1, 3])], axis=2,
                          read=[("ConcatFromSequence", {"axis": 2})],
                          expect=["f32[2, n, 4]"],
                          checks=["CHECK: Split(%x, %split) {axis = 2} : "
                                  "f32[2, n, 1], f32[2, n, 3]"]),
    "SequenceConstruct": op([x(), x("y", F, [2, "n", 4])], read=STACK,
                            expect=["f32[2, 2, n, 4]"],
                            checks=["CHECK: Unsqueeze(%x,",
                                    "CHECK: Unsqueeze(%y,"]),
    "SequenceEmpty": op([], read=[("SequenceLength", {})], expect=["i64[]"],
                        checks=["CHECK: Constant() {value = dense<i64[], "
                                "[0]>}"]),
    "SequenceAt": op([seq(), c("i", I64, -1)], expect=["f32[2, n, 4]"],
                     checks=["CHECK: %out0 = Identity(%s1) : f32[2, n, 4]"]),
    "SequenceErase": op([seq()], read=STACK, expect=["f32[1, 2, n, 4]"],
                        checks=["CHECK-NOT: Unsqueeze(%s1,",
                                "CHECK: Unsqueeze(%s0,"]),
    "SequenceInsert": op([seq(), x()], read=STACK,
                         expect=["f32[3, 2, n, 4]"],
                         checks=["CHECK: Concat(%{{.*}}, %{{.*}}, %{{.*}})"]),
    "SequenceLength": op([seq()], expect=["i64[]"],
                         checks=["CHECK: Constant() {value = dense<i64[], "
                                 "[2]>}"]),
    "SequenceMap": op([seq()], body=MAP_BODY, read=STACK,
                      expect=["f32[2, 2, n, 4]"],
                      checks=["CHECK: Relu(%s0)", "CHECK: Relu(%s1)"]),
    "ConcatFromSequence": op([seq()], axis=0, expect=["f32[4, n, 4]"],
                             checks=["CHECK: Concat(%s0, %s1) {axis = 0}"]),
    "Optional": op([x()], opset=18, read=[("OptionalGetElement", {})],
                   expect=["f32[2, n, 4]"],
                   checks=["CHECK: %out0 = Identity(%x) : f32[2, n, 4]"]),
    "OptionalGetElement": op([opt()], opset=18, expect=["f32[2, n, 4]"],
                             checks=["CHECK: %out0 = Identity(%o0) : f32[2, n, 4]"]),
    "OptionalHasElement": op([opt()], opset=18, expect=["bool[]"],
                             checks=["CHECK: Constant() {value = "
                                     "dense<bool[], [true]>}"]),
    # Newer than libonnx 1.12: the expected types from the operator specs.
    "BitwiseAnd": op([x("a", I32, [2, "n"]), x("b", I32, [2, "n"])],
                     opset=18, expect=["i32[2, n]"]),
    "BitwiseOr": op([x("a", I32, [2, "n"]), x("b", I32, [2, "n"])],
                    opset=18, expect=["i32[2, n]"]),
    "BitwiseXor": op([x("a", I32, [2, "n"]), x("b", I32, [2, "n"])],
                     opset=18, expect=["i32[2, n]"]),
    "BitwiseNot": op([x("a", I32, [2, "n"])], opset=18,
                     expect=["i32[2, n]"]),
    "Mish": op([x()], opset=18, expect=["f32[2, n, 4]"]),
    "CenterCropPad": op([X4, c("shape", I64, [4, 4]), ], opset=18,
                        axes=[2, 3], expect=["f32[2, 3, 4, 4]"]),
    "Col2Im": op([x("x", F, [1, 12, 9]), c("img", I64, [4, 4]),
                  c("blk", I64, [2, 2])], opset=18,
                 expect=["f32[1, 3, 4, 4]"]),
    "GroupNormalization": op([X4, x("s", F, [3]), x("b", F, [3])], opset=21,
                             num_groups=3, expect=["f32[2, 3, 8, 8]"]),
    "DeformConv": op([X4, W4, x("off", F, [2, 18, 6, 6])], opset=19,
                     expect=["f32[2, 4, 6, 6]"]),
    "AffineGrid": op([x("theta", F, [2, 2, 3]), c("size", I64, [2, 3, 5, 6])],
                     opset=20, expect=["f32[2, 5, 6, 2]"]),
    "Gelu": op([x()], opset=20, expect=["f32[2, n, 4]"]),
    "ImageDecoder": op([x("bytes", U8, [100])], opset=20, declare=True,
                       expect=["u8[32, 32, 3]"]),
    "RegexFullMatch": op([x("s", S, [3])], opset=20, pattern="a",
                         expect=["unsupported"]),
    "StringConcat": op([x("s", S, [3]), x("t", S, [3])], opset=20,
                       expect=["unsupported"]),
    "StringSplit": op([x("s", S, [3])], opset=20, outputs=2,
                      expect=["unsupported"]),
    "Attention": op([x("q", F, [2, 4, "n", 8]), x("k", F, [2, 4, "n", 8]),
                     x("v", F, [2, 4, "n", 8])], opset=23,
                    expect=["f32[2, 4, n, 8]"]),
    "RMSNormalization": op([x(), x("g", F, [4])], opset=23,
                           expect=["f32[2, n, 4]"]),
    "RotaryEmbedding": op([x("x", F, [2, 4, "n", 8]), x("cos", F, [2, "n", 4]),
                           x("sin", F, [2, "n", 4])], opset=23,
                          expect=["f32[2, 4, n, 8]"]),
    "TensorScatter": op([x("cache", F, [2, 16, 4]), x("u", F, [2, 3, 4]),
                         x("w", I64, [2])], opset=24, axis=1,
                        expect=["f32[2, 16, 4]"]),
    "Swish": op([x()], opset=24, alpha=1.0, expect=["f32[2, n, 4]"]),
})
# Ops that are functions of others in newer opsets, with no schema before.
for name in ["Gelu", "Mish"]:
    SPECS[name]["function"] = True


def type_str(t):
    """A TypeProto as autopar prints a tensor type; None when not a tensor
    with a shape."""
    if not t.HasField("tensor_type") or not t.tensor_type.HasField("shape"):
        return None
    elem = ELEM.get(t.tensor_type.elem_type)
    if elem is None:
        return None
    dims = []
    for d in t.tensor_type.shape.dim:
        if d.HasField("dim_value"):
            dims.append(str(d.dim_value))
        elif d.HasField("dim_param") and not d.dim_param.startswith("unk__"):
            dims.append(d.dim_param)
        else:
            dims.append("?")
    return "%s[%s]" % (elem, ", ".join(dims))


def value_info(name, elem, shape):
    return helper.make_tensor_value_info(name, elem, shape)


def build(name, spec):
    """The one-node model of an op and the expected output types."""
    inputs, inits, names, nodes = [], [], [], []
    for i, inp in enumerate(spec["inputs"]):
        if inp is None:
            names.append("")
            continue
        n, elem, shape, values = inp
        names.append(n)
        if elem in ("sequence", "optional"):
            parts = [n + "0", n + "1"] if elem == "sequence" else [n + "0"]
            inputs += [value_info(p, F, shape) for p in parts]
            nodes.append(helper.make_node(
                "SequenceConstruct" if elem == "sequence" else "Optional",
                parts, [n], name="make_" + n))
        elif values is None:
            inputs.append(value_info(n, elem, shape))
        else:
            inits.append(helper.make_tensor(n, elem, shape, values))
    outs = ["y%d" % i for i in range(spec["outputs"])]
    nodes.append(helper.make_node(name, names, outs, name="op",
                                  **spec["attrs"]))
    for i, o in enumerate(outs):
        for k, (reader, attrs) in enumerate(spec["read"]):
            nodes.append(helper.make_node(reader, [o], ["%s_r%d" % (o, k)],
                                          name="read%d_%d" % (i, k), **attrs))
            o = "%s_r%d" % (o, k)
        nodes.append(helper.make_node("Identity", [o], ["out%d" % i],
                                      name="id%d" % i))
    outputs = [helper.make_empty_tensor_value_info("out%d" % i)
               for i in range(len(outs))]
    graph = helper.make_graph(nodes, name, inputs, outputs, inits)
    model = helper.make_model(
        graph, opset_imports=[helper.make_opsetid("", spec["opset"])])
    model.ir_version = 8 if spec["opset"] <= 17 else 10
    expect = spec["expect"]
    if expect is None:
        inferred = shape_inference.infer_shapes(model, strict_mode=True)
        types = {v.name: v.type for v in inferred.graph.value_info}
        expect = [type_str(types[o]) if o in types else None for o in outs]
    if spec["declare"] and expect and expect[0] != "unsupported":
        # unknown dimensions are declared without a size
        del graph.output[:]
        for i, t in enumerate(expect):
            elem = {v: k for k, v in ELEM.items()}[t.split("[")[0]]
            dims = [int(d) if d.isdigit() else (None if d == "?" else d)
                    for d in t[t.index("[") + 1:-1].split(", ") if d]
            graph.output.append(value_info("out%d" % i, elem, dims))
            graph.value_info.append(value_info(outs[i], elem, dims))
        model = helper.make_model(
            graph, opset_imports=[helper.make_opsetid("", spec["opset"])])
        model.ir_version = 8 if spec["opset"] <= 17 else 10
    return model, expect


def write(out):
    os.makedirs(out, exist_ok=True)
    count = 0
    for name, spec in sorted(SPECS.items()):
        if isinstance(spec, str):
            continue
        try:
            model, expect = build(name, spec)
        except Exception as e:  # a spec ONNX rejects: a bug here
            sys.exit("onnx_ops.py: %s: %s" % (name, e))
        with open(os.path.join(out, name + ".onnx"), "wb") as f:
            f.write(model.SerializeToString())
        lines = list(spec["checks"])
        if expect and expect[0] == "unsupported":
            lines.append("CHECK: error: {{.*}}is not supported")
        else:
            for i, t in enumerate(expect):
                # A check of the output's own line replaces this one.
                if t is not None and not any(
                        "%%out%d = " % i in line for line in lines):
                    # Where ONNX knows no size, autopar may know one.
                    t = t.replace("?", "{{[^],]+}}")
                    lines.append("CHECK-DAG: %%out%d = Identity(%%{{.*}}) : "
                                 "%s" % (i, t))
        with open(os.path.join(out, name + ".check"), "w") as f:
            f.write("\n".join(lines) + "\n")
        count += 1
    print("wrote %d one-node models" % count)


# The opset each op appeared in, for the ops newer than libonnx 1.12.
NEWER = {"BitwiseAnd": 18, "BitwiseNot": 18, "BitwiseOr": 18,
         "BitwiseXor": 18, "CenterCropPad": 18, "Col2Im": 18,
         "GroupNormalization": 18, "Mish": 18, "DeformConv": 19,
         "AffineGrid": 20, "Gelu": 20, "ImageDecoder": 20,
         "RegexFullMatch": 20, "StringConcat": 20, "StringSplit": 20,
         "Attention": 23, "RMSNormalization": 23, "RotaryEmbedding": 23,
         "Swish": 24, "TensorScatter": 24}
# How autopar takes what it has no importer for.
CONTROL = "Opaque, typed by ONNX's inference (bodies not imported)"
# Opaque op types ir/OpaqueFlops.cpp has no FLOP estimate for.
UNESTIMATED = {"ImageDecoder"}
REFUSED_STR = "refused: string tensors (no IR type)"


def importers():
    """(domain, op) -> importer, from frontend/OnnxOps.def."""
    table = {}
    pattern = re.compile(r'ONNX_OP\("([^"]*)",\s*"([^"]+)",\s*([^)]+\)?)\)')
    with open(os.path.join(ROOT, "frontend", "OnnxOps.def")) as f:
        for m in pattern.finditer(f.read()):
            table[(m.group(1), m.group(2))] = m.group(3).strip()
    return table


# Importers that do more than adapt older forms.
DESCRIBE = {
    "importIf": "the branch taken, inlined, when the condition is known; "
                "else Opaque typed by ONNX's inference, priced as its "
                "costlier branch",
    "importConstant": "`Constant` (integer and scalar data) or a parameter",
    "importIdentity": "`Identity`, or the parameter (or sequence) it copies",
    "importLoop": "unrolled when its trip count and conditions are known "
                  "(at most 4096 nodes); else Opaque typed by ONNX's "
                  "inference, priced as its body times the trip count "
                  "when that is known",
    "importScan": "unrolled when its scanned axes are static (opset 9 on, "
                  "at most 4096 nodes): `Gather` per step, `Unsqueeze` + "
                  "`Concat`; else Opaque typed by ONNX's inference, "
                  "priced as its body times the steps when over the "
                  "budget",
    "importSequenceEmpty": "an empty sequence (sequences are held as their "
                           "tensors)",
    "importSequenceConstruct": "the sequence of its inputs",
    "importSplitToSequence": "`Split` (then `Squeeze` each for keepdims = "
                             "0); sizes known at import",
    "importSequenceAt": "the tensor at a position known at import",
    "importSequenceInsert": "the sequence with it inserted at a known "
                            "position",
    "importSequenceErase": "the sequence without the tensor at a known "
                           "position",
    "importSequenceLength": "an i64 `Constant`",
    "importConcatFromSequence": "`Concat` (after `Unsqueeze` each for "
                                "new_axis)",
    "importSequenceMap": "its body once per element (at most 4096 nodes)",
    "importOptional": "a sequence of at most one tensor",
    "importOptionalHasElement": "a bool `Constant`",
    "importOptionalGetElement": "its tensor (an error when empty)",
    "importQuantizeLinear": "`QuantizeLinear`, `output_dtype` as "
                            "`output_type`",
    "importDequantizeLinear": "`DequantizeLinear`",
    "importQLinearMatMul": "`MatMulInteger`, its scales, `QuantizeLinear`",
    "importQLinearConv": "`ConvInteger`, its bias and scales, "
                         "`QuantizeLinear`",
    "importCastLike": "`Cast` to the second input's element type",
    "importEyeLike": "`EyeLike`, dtype as an element type",
    "importSoftmaxCrossEntropyLoss": "`LogSoftmax` over the classes and "
                                     "`NegativeLogLikelihoodLoss`",
    "importGlobalMaxPool": "`ReduceMax` over the spatial axes",
    "importLpNormalization": "`ReduceL1` or `ReduceL2`, and `Div`",
    "importResize": "`Resize`; opset 10 asymmetric with onnxruntime's "
                    "opset-10 rounding, opset 11's empty roi and scales "
                    "dropped (ImageImporters.cpp)",
    "importUpsample": "`Resize`, asymmetric with onnxruntime's opset-10 "
                      "rounding; opset 7's scales attribute as a constant",
    "importMeanVarianceNormalization": "`ReduceMean`, `Sub`, `Mul`, `Sqrt`, "
                                       "`Add` and `Div`",
}


def how(name, spec, table):
    imp = table.get(("", name))
    if imp in DESCRIBE:
        return DESCRIBE[imp]
    if imp is None:
        if spec == "control":
            return CONTROL
        if name in ("Loop", "Scan"):
            return CONTROL
        if isinstance(spec, dict) and spec["expect"] == ["unsupported"]:
            return REFUSED_STR
        if name in NEWER:
            return "Opaque; the model must declare its types"
        return ("Opaque, typed by ONNX's inference, priced by %s"
                % ("its bytes (memory-bound)" if name in UNESTIMATED
                   else "estimated FLOPs and its bytes"))
    m = re.match(r"importDirect<OpId::(\w+)>", imp)
    if m:
        return "`%s`" % m.group(1)
    m = re.match(r"import\w+<OpId::(\w+)>", imp)
    if m:
        return "`%s`, older forms adapted" % m.group(1)
    m = re.match(r"import(\w+)$", imp)
    if m:
        return "`%s`, older forms adapted (OpImporters.cpp)" % m.group(1)
    return "`%s`" % imp


def table_text():
    from onnx import defs
    since = {}
    for schema in defs.get_all_schemas_with_history():
        if schema.domain == "":
            since[schema.name] = min(since.get(schema.name, 99),
                                     schema.since_version)
    since.update(NEWER)
    table = importers()
    rows = ["| op | since | imported as |", "|---|---|---|"]
    for name in sorted(SPECS, key=str.lower):
        rows.append("| %s | %d | %s |" % (name, since.get(name, 0),
                                          how(name, SPECS[name], table)))
    return "\n".join(rows) + "\n"


def main():
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--write", metavar="DIR")
    ap.add_argument("--table", action="store_true")
    args = ap.parse_args()
    if args.write:
        write(args.write)
    if args.table:
        sys.stdout.write(table_text())
    return 0


if __name__ == "__main__":
    sys.exit(main())
