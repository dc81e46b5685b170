#!/usr/bin/env python3
"""Compares the CPU runtime's forward outputs with onnxruntime's.

  ort_compare.py --models DIR --work DIR [--plan tp=2,pp=2] [MODEL...]

For each model of the table below (all of them when none is named; names
are the table's), on seeded inputs:

  1. autopar-opt MODEL.onnx --load-weights --dim NAME=SIZE ...
       --passes=import-canonical -o WORK/NAME.air
  2. autopar-run --eval WORK/NAME.air --weights-dir <the model's folder>
       --input NAME=FILE ... -o WORK/NAME.out
  3. onnxruntime (CPUExecutionProvider, graph optimizations off) on the same
     model and inputs;
  4. every output compared: it matches when max |out - ref| <= 1e-4 * max
     |ref| (and the shapes and dtypes agree).

Prints one line per model, in the order given:

  NAME: match (max rel err X)
  NAME: MISMATCH output I 'OUT': ...
  NAME: not run: the runtime lacks ops A, B        (no CPU kernel for them)
  NAME: not run: autopar-opt cannot import it: ... (the importer's error)
  NAME: ERROR: ...                                 (anything else)

With --plan PINS, a model that matches on one rank is then planned with
`autopar COPY --gpu cpu --gpus N --fix PINS,mbs=BATCH,schedule=gpipe
--forward-programs` (COPY: the model with every initializer as external
data, so that the plan's parameters read the model's weights; the batch is
the dimension named like "batch", else, for a model exported for one batch
size, its first input's leading one: `--batch-dim INPUT:0`), and its
forward programs run under `mpirun -np N autopar-run --eval PLAN`; the
outputs of the rank that holds them (the last stage's, made whole) are
compared with onnxruntime's instead. A model that cannot be planned so
(no batch dimension, too few layers for the stages) is `not run: not
planned: ...` with autopar's reason.

and a last line `N match, M not run, K failed`. Exits 1 when a model that
runs mismatches or fails, else 0. autopar-opt and autopar-run are found on
the PATH.

Inputs: floats are normal(0, 1), integer ids uniform in range of the
embedding they index, from a generator seeded by the model's name. A model
whose inputs have no shape gets a copy with the table's shapes.

"light" models (onnx's onnx_light/: the weights are ConstantOfShape nodes of
one value, e.g. 0.02, which the importer turns into parameters without data)
get a copy of the model in WORK whose ConstantOfShape weights are seeded
initializers (He-scaled for Conv/Gemm weights, positive variances for
BatchNormalization), saved as external data beside it, so that onnxruntime
and the runtime read the same weights. The copy is made only once the
original model's import ran on the runtime (its parameters initialised by
the runtime), so that models with missing ops are reported without writing
their weights.

When the runtime has no kernel for a node, every distinct op of the program
is probed with a one-node program (its operands: the original parameters
and constants, zero-filled inputs otherwise); the ops whose probe also says
`no CPU kernel` are the ones reported.
"""

import argparse
import json
import os
import re
import subprocess
import sys
import zlib

import numpy as np
import onnx
from onnx import numpy_helper

TOLERANCE = 1e-4

# name -> (path under the models folder, symbolic dims, options)
#   shapes: input name -> shape, for inputs the model leaves without one
#   inputs: input name -> how to fill it instead of normal(0, 1):
#           "causal-mask" (1 on and below the diagonal, else 0), "positive"
#           (uniform(0.5, 1.5): the model divides by it), ("positions", OFF)
#           (OFF, OFF + 1, ... along the last dimension), ("normal", S)
#           (normal(0, S))
#   light:  weights are ConstantOfShape nodes (seeded copy)
MODELS = [
    ("gpt2_tiny_opset14", "torch_export/gpt2_tiny_opset14.onnx",
     {"batch": 2, "sequence": 16}, {}),
    ("gpt2_tiny_opset17", "torch_export/gpt2_tiny_opset17.onnx",
     {"batch": 2, "sequence": 16}, {}),
    ("gpt2_tiny_opset17_extdata",
     "torch_export/gpt2_tiny_opset17_extdata/model.onnx",
     {"batch": 2, "sequence": 16}, {}),
    ("llama_tiny_opset14", "torch_export/llama_tiny_opset14.onnx",
     {"batch": 2, "sequence": 16}, {}),
    ("llama_tiny_opset17", "torch_export/llama_tiny_opset17.onnx",
     {"batch": 2, "sequence": 16}, {}),
    ("mlp_megatron_basic_test", "ort_megatron/mlp_megatron_basic_test.onnx",
     {"batch": 2, "seqlen": 8}, {}),
    ("bart_mlp_megatron_basic_test",
     "ort_megatron/bart_mlp_megatron_basic_test.onnx",
     {"batch": 2, "seqlen": 8}, {}),
    # A synthetic block that divides its scores by the mask.
    ("self_attention_megatron_basic_test",
     "ort_megatron/self_attention_megatron_basic_test.onnx",
     {"batch": 2, "seqlen": 8}, {"inputs": {"mask": "positive"}}),
    ("bart_self_attention_megatron_basic_test",
     "ort_megatron/bart_self_attention_megatron_basic_test.onnx", {}, {}),
    # One layer with a KV cache: 3 past positions, 4 new ones; the causal
    # mask is sliced to [past, past + seq) x [0, past + seq).
    ("gpt2_megatron", "ort_transformers_test/gpt2_megatron.onnx",
     {"batch_size": 2, "seq_len": 4, "past_seq_len": 3},
     {"inputs": {"position_ids": ("positions", 3),
                 "attention_mask": "causal-mask"}}),
    ("polygraphy_attention", "polygraphy/attention.onnx", {},
     {"shapes": {"q": [2, 8, 16], "k": [2, 16, 8], "v": [2, 8, 16]}}),
    ("polygraphy_multi_attention", "polygraphy/multi_attention.onnx", {},
     {"shapes": {"q": [2, 8, 16], "k": [2, 16, 8], "v": [2, 8, 16],
                 "q1": [4, 16], "k2": [16, 4], "v2": [4, 16]}}),
    # Its Transpose reverses all three dimensions: only [100, 100, 100]
    # fits. Its weights are normal(0, 1) over 100 features: at input scale 1
    # the logits are ~1e3 and the softmax is so peaked that float32 itself
    # is 2e-4 off (onnxruntime against float64, as the runtime).
    # Its `batch` is contracted (not a batch): a parallel plan binds it and
    # takes the sequence axis as the (fixed) batch.
    ("polygraphy_attention_head", "polygraphy/attention_head.onnx",
     {"sequence_len": 100, "batch": 100},
     {"inputs": {"input": ("normal", 0.03)}, "plan_batch": "input:0"}),
    ("polygraphy_matmul_2layer", "polygraphy/matmul_2layer.onnx", {}, {}),
    ("polygraphy_transpose_matmul", "polygraphy/transpose_matmul.onnx", {},
     {}),
    ("polygraphy_dim_param", "polygraphy/dim_param.onnx", {"dim0": 2}, {}),
    ("polygraphy_surgeon_example", "polygraphy/surgeon_example_model.onnx",
     {}, {}),
    ("polygraphy_ext_weights", "polygraphy_extdata/ext_weights.onnx", {}, {}),
    ("polygraphy_residual_block", "polygraphy/residual_block.onnx", {},
     {"shapes": {"gpu_0/data_0": [1, 3, 224, 224]}}),
    # A QDQ convolution (onnxruntime's quantization tools): u8 activations,
    # i8 weights and an i32 bias dequantized, then Conv in float.
    ("ort_conv_qdq", "ort_extdata/conv_qdq_external_ini.onnx", {}, {}),
] + [("light_" + name, "onnx_light/light_%s.onnx" % name, {},
      {"light": True})
     for name in ["bvlc_alexnet", "densenet121", "inception_v1",
                  "inception_v2", "resnet50", "shufflenet", "squeezenet",
                  "vgg19", "zfnet512"]]

ONNX_TO_AIR = {
    onnx.TensorProto.FLOAT: "f32", onnx.TensorProto.DOUBLE: "f64",
    onnx.TensorProto.FLOAT16: "f16", onnx.TensorProto.INT64: "i64",
    onnx.TensorProto.INT32: "i32", onnx.TensorProto.INT8: "i8",
    onnx.TensorProto.UINT8: "u8", onnx.TensorProto.BOOL: "bool",
}
AIR_TO_NUMPY = {
    "f32": "<f4", "f64": "<f8", "f16": "<f2", "i64": "<i8", "i32": "<i4",
    "i16": "<i2", "i8": "i1", "u8": "u1", "bool": "u1",
}
TIMEOUT = 300


class NotRun(Exception):
    pass


class Failure(Exception):
    pass


def run(argv, what):
    """Runs a tool; returns (returncode, combined output)."""
    try:
        p = subprocess.run(argv, stdout=subprocess.PIPE,
                           stderr=subprocess.STDOUT, timeout=TIMEOUT)
    except subprocess.TimeoutExpired:
        raise Failure("%s timed out after %d s" % (what, TIMEOUT))
    return p.returncode, p.stdout.decode("utf-8", "replace")


def first_error(text):
    for line in text.splitlines():
        if "error" in line:
            return line.strip()
    lines = [l for l in text.splitlines() if l.strip()]
    return lines[-1].strip() if lines else "(no output)"


# ---------------------------------------------------------------------------
# Inputs


def input_specs(model, dims, shapes):
    """[(name, .air element type, shape)] of the graph inputs that are
    not initializers, with symbolic dims bound."""
    inits = {i.name for i in model.graph.initializer}
    specs = []
    for i in model.graph.input:
        if i.name in inits:
            continue
        t = i.type.tensor_type
        if i.name in shapes:
            shape = list(shapes[i.name])
        elif not t.HasField("shape"):
            raise Failure("input '%s' has no shape; the table must give one"
                          % i.name)
        else:
            shape = []
            for d in t.shape.dim:
                if d.HasField("dim_value") and d.dim_value > 0:
                    shape.append(d.dim_value)
                elif d.dim_param in dims:
                    shape.append(dims[d.dim_param])
                else:
                    raise Failure("input '%s': no size for dimension '%s'"
                                  % (i.name, d.dim_param or "?"))
        air = ONNX_TO_AIR.get(t.elem_type)
        if air is None:
            raise Failure("input '%s' has ONNX element type %d"
                          % (i.name, t.elem_type))
        specs.append((i.name, air, shape))
    return specs


def index_bound(model, name):
    """The row count of the initializer that a Gather indexes with `name`,
    or None."""
    inits = {i.name: i for i in model.graph.initializer}
    for n in model.graph.node:
        if n.op_type == "Gather" and len(n.input) > 1 and n.input[1] == name \
                and n.input[0] in inits:
            axis = 0
            for a in n.attribute:
                if a.name == "axis":
                    axis = a.i
            return inits[n.input[0]].dims[axis]
    return None


def make_inputs(model, specs, options, rng):
    values = {}
    gen = options.get("inputs", {})
    for name, air, shape in specs:
        kind = gen.get(name)
        if kind == "causal-mask":
            s = shape[-1]
            tri = np.tril(np.ones((shape[-2], s)), s - shape[-2])
            v = np.broadcast_to(tri, shape).astype(AIR_TO_NUMPY[air])
        elif kind == "positive":
            v = rng.uniform(0.5, 1.5, shape).astype(AIR_TO_NUMPY[air])
        elif isinstance(kind, tuple) and kind[0] == "normal":
            v = (rng.standard_normal(shape) * kind[1]).astype(
                AIR_TO_NUMPY[air])
        elif isinstance(kind, tuple) and kind[0] == "positions":
            v = np.broadcast_to(np.arange(kind[1], kind[1] + shape[-1]),
                                shape).astype(AIR_TO_NUMPY[air])
        elif air.startswith("f"):
            v = rng.standard_normal(shape).astype(AIR_TO_NUMPY[air])
        elif air.startswith("i"):
            bound = index_bound(model, name)
            if bound is None:
                raise Failure("integer input '%s' indexes no embedding; the "
                              "table must say how to fill it" % name)
            v = rng.integers(0, bound, shape).astype(AIR_TO_NUMPY[air])
        else:
            raise Failure("no generator for input '%s' (%s)" % (name, air))
        values[name] = np.ascontiguousarray(v)
    return values


# ---------------------------------------------------------------------------
# Model copies


def set_shapes(model, shapes):
    for i in model.graph.input:
        if i.name in shapes:
            t = i.type.tensor_type
            t.ClearField("shape")
            for d in shapes[i.name]:
                t.shape.dim.add().dim_value = d


def seed_light_weights(model, rng):
    """Replaces the ConstantOfShape weights of a light model by seeded
    initializers."""
    g = model.graph
    inits = {i.name: i for i in g.initializer}
    users = {}
    for n in g.node:
        for k, v in enumerate(n.input):
            users.setdefault(v, []).append((n, k))
    keep, new_inits, dropped = [], [], set()
    for n in g.node:
        if n.op_type != "ConstantOfShape" or n.input[0] not in inits:
            keep.append(n)
            continue
        shape = [int(d) for d in numpy_helper.to_array(inits[n.input[0]])]
        out = n.output[0]
        role = [(u.op_type, k, u) for u, k in users.get(out, [])]
        op, k, user = role[0] if role else (None, None, None)
        if op == "Conv" and k == 1:
            fan_in = int(np.prod(shape[1:]))
            w = rng.standard_normal(shape) * np.sqrt(2.0 / fan_in)
        elif op == "Gemm" and k == 1:
            trans_b = any(a.name == "transB" and a.i for a in user.attribute)
            fan_in = shape[1] if trans_b else shape[0]
            w = rng.standard_normal(shape) * np.sqrt(2.0 / fan_in)
        elif op == "BatchNormalization" and k in (1, 4):
            w = rng.uniform(0.5, 1.5, shape)
        elif op in ("Conv", "Gemm", "BatchNormalization"):
            w = rng.standard_normal(shape) * 0.1
        else:
            w = rng.uniform(0.5, 1.5, shape)
        new_inits.append(numpy_helper.from_array(w.astype(np.float32), out))
        dropped.add(n.input[0])
    del g.node[:]
    g.node.extend(keep)
    still_used = {v for n in keep for v in n.input}
    dropped -= still_used
    remaining = [i for i in g.initializer if i.name not in dropped]
    del g.initializer[:]
    g.initializer.extend(remaining + new_inits)
    ins = [i for i in g.input if i.name not in dropped]
    del g.input[:]
    g.input.extend(ins)


def save_copy(model, path):
    onnx.save_model(model, path, save_as_external_data=True,
                    all_tensors_to_one_file=True,
                    location=os.path.basename(path) + ".data",
                    size_threshold=4096)


# ---------------------------------------------------------------------------
# The .air text: enough to cut one node out into a program of its own


def split_top(text, sep):
    """Splits at `sep` outside quotes and brackets."""
    parts, depth, quote, cur, i = [], 0, False, [], 0
    while i < len(text):
        c = text[i]
        if quote:
            cur.append(c)
            if c == "\\" and i + 1 < len(text):
                cur.append(text[i + 1])
                i += 1
            elif c == '"':
                quote = False
        elif c == '"':
            quote = True
            cur.append(c)
        elif c in "([{<":
            depth += 1
            cur.append(c)
        elif c in ")]}>":
            depth -= 1
            cur.append(c)
        elif depth == 0 and text.startswith(sep, i):
            parts.append("".join(cur))
            cur = []
            i += len(sep)
            continue
        else:
            cur.append(c)
        i += 1
    parts.append("".join(cur))
    return parts


def match_close(text, start):
    """The index of the bracket closing the one at `start`."""
    depth, quote, i = 0, False, start
    while i < len(text):
        c = text[i]
        if quote:
            if c == "\\":
                i += 1
            elif c == '"':
                quote = False
        elif c == '"':
            quote = True
        elif c in "([{<":
            depth += 1
        elif c in ")]}>":
            depth -= 1
            if depth == 0:
                return i
        i += 1
    raise ValueError("unbalanced: " + text[:80])


NODE_RE = re.compile(r"([A-Za-z_][\w.]*)\(")


def parse_node(line):
    """(results, op, operands, attrs, types) of a node line, else None."""
    s = line.strip()
    if not s.startswith("%"):
        return None
    head = split_top(s, " = ")
    if len(head) < 2:
        return None
    results = [r.strip() for r in split_top(head[0], ", ")]
    rest = " = ".join(head[1:])
    m = NODE_RE.match(rest)
    if not m:
        return None
    op = m.group(1)
    open_paren = m.end() - 1
    close = match_close(rest, open_paren)
    inner = rest[open_paren + 1:close].strip()
    operands = [o.strip() for o in split_top(inner, ", ")] if inner else []
    rest = rest[close + 1:].strip()
    attrs = ""
    if rest.startswith("{"):
        close = match_close(rest, 0)
        attrs = rest[:close + 1]
        rest = rest[close + 1:].strip()
    if not rest.startswith(":"):
        return None
    types = split_top(rest[1:].strip(), " loc(")[0].strip()
    return results, op, operands, attrs, [t.strip()
                                          for t in split_top(types, ", ")]


def parse_program(text):
    """Values' types and definitions, and the nodes, of a one-graph .air."""
    types, params, consts, nodes = {}, {}, {}, []
    for line in text.splitlines():
        s = line.strip()
        if s.startswith("graph "):
            args = s[s.index("("):]
            args = args[1:match_close(args, 0)]
            for a in split_top(args, ", ") if args.strip() else []:
                name, _, ty = a.partition(": ")
                types[name.strip()] = split_top(ty, " {")[0].strip()
        elif s.startswith("param "):
            decl = split_top(s[len("param "):], " = ")
            name, _, ty = decl[0].partition(": ")
            types[name.strip()] = ty.strip()
            params[name.strip()] = s
        else:
            node = parse_node(s)
            if node:
                results, op, _, _, tys = node
                for r, t in zip(results, tys):
                    types[r] = t
                if op == "Constant" and len(results) == 1:
                    consts[results[0]] = node
                nodes.append(node)
    return types, params, consts, nodes


def probe_program(node, types, params, consts):
    """A program of the one node; the files its inputs need, by name."""
    results, op, operands, attrs, tys = node
    args, body, inputs, renamed = [], [], {}, {}
    for k, v in enumerate(operands):
        if v in renamed or not v.startswith("%"):
            continue
        new = "%%in%d" % k
        renamed[v] = new
        if v in params:
            decl = params[v]
            body.append("  param " + new + decl[len("param ") + len(v):])
        elif v in consts:
            _, _, _, cattrs, ctys = consts[v]
            body.append("  %s = Constant() %s : %s" % (new, cattrs, ctys[0]))
        else:
            args.append("%s: %s" % (new, types[v]))
            inputs[new[1:]] = types[v]
    ops = ", ".join(renamed.get(v, v) for v in operands)
    outs = ["%%out%d" % k for k in range(len(results))]
    body.append("  %s = %s(%s) %s : %s loc(\"probe\")" %
                (", ".join(outs), op, ops, attrs, ", ".join(tys)))
    body.append("  return " + ", ".join(outs))
    return ("graph @probe(%s) {\n%s\n}\n" % (", ".join(args), "\n".join(body)),
            inputs)


def type_bytes(ty):
    m = re.match(r"(\w+)\[(.*)\]$", ty)
    elem, dims = m.group(1), m.group(2)
    count = 1
    for d in dims.split(",") if dims.strip() else []:
        count *= int(d)
    return count * np.dtype(AIR_TO_NUMPY[elem]).itemsize


NO_KERNEL_RE = re.compile(r"\((\w+)\): no CPU kernel")


def missing_ops(air_path, weights_dir, work):
    """The ops of the program whose one-node probes have no CPU kernel."""
    with open(air_path) as f:
        types, params, consts, nodes = parse_program(f.read())
    seen, missing = set(), set()
    for node in nodes:
        op = node[1]
        if op in seen:
            continue
        seen.add(op)
        text, inputs = probe_program(node, types, params, consts)
        base = os.path.join(work, "probe-" + op)
        with open(base + ".air", "w") as f:
            f.write(text)
        argv = ["autopar-run", "--eval", base + ".air", "--weights-dir",
                weights_dir, "-o", base + ".out"]
        for name, ty in inputs.items():
            path = "%s.%s.bin" % (base, name)
            with open(path, "wb") as f:
                f.truncate(type_bytes(ty))
            argv += ["--input", "%s=%s" % (name, path)]
        _, out = run(argv, "autopar-run (probe of %s)" % op)
        missing.update(NO_KERNEL_RE.findall(out))
    return sorted(missing)


# ---------------------------------------------------------------------------
# One model


def run_autopar(name, onnx_path, dims, inputs, work, tag):
    """Imports and runs the model; returns its outputs or raises
    NotRun for import errors and missing kernels."""
    air = os.path.join(work, "%s%s.air" % (name, tag))
    argv = ["autopar-opt", onnx_path, "--load-weights"]
    for d, size in sorted(dims.items()):
        argv += ["--dim", "%s=%d" % (d, size)]
    argv += ["--passes=import-canonical", "-o", air]
    rc, out = run(argv, "autopar-opt")
    if rc != 0:
        raise NotRun("autopar-opt cannot import it: " + first_error(out))
    weights_dir = os.path.dirname(os.path.abspath(onnx_path))
    out_dir = os.path.join(work, "%s%s.out" % (name, tag))
    argv = ["autopar-run", "--eval", air, "--weights-dir", weights_dir,
            "-o", out_dir]
    for input_name, value in inputs.items():
        path = os.path.join(work, "%s%s.%s.bin" % (
            name, tag, re.sub(r"[^\w.-]", "_", input_name)))
        value.tofile(path)
        argv += ["--input", "%s=%s" % (input_name, path)]
    rc, out = run(argv, "autopar-run")
    if rc != 0:
        if NO_KERNEL_RE.search(out):
            ops = set(missing_ops(air, weights_dir, work))
            ops.update(NO_KERNEL_RE.findall(out))
            raise NotRun("the runtime lacks ops " + ", ".join(sorted(ops)))
        raise Failure("autopar-run: " + first_error(out))
    return read_outputs(out_dir)


def run_ort(onnx_path, inputs):
    import onnxruntime as ort
    options = ort.SessionOptions()
    options.graph_optimization_level = \
        ort.GraphOptimizationLevel.ORT_DISABLE_ALL
    options.log_severity_level = 3  # no warnings about unused initializers
    options.intra_op_num_threads = 1
    options.inter_op_num_threads = 1
    try:
        session = ort.InferenceSession(onnx_path, options,
                                       providers=["CPUExecutionProvider"])
        names = [o.name for o in session.get_outputs()]
        return names, session.run(None, inputs)
    except Exception as e:  # onnxruntime raises its own exception types
        raise Failure("onnxruntime: " + str(e).splitlines()[0])


def compare(outputs, ref_names, refs):
    if len(outputs) != len(refs):
        raise Failure("autopar-run wrote %d outputs, onnxruntime %d" %
                      (len(outputs), len(refs)))
    worst, problems = 0.0, []
    for k, ((name, dtype, out), ref) in enumerate(zip(outputs, refs)):
        label = "output %d '%s'" % (k, ref_names[k])
        ref = np.asarray(ref)
        if list(out.shape) != list(ref.shape):
            problems.append("%s: shape %s, onnxruntime's %s" %
                            (label, list(out.shape), list(ref.shape)))
            continue
        if dtype == "bool":
            out = out.astype(bool)
        if ref.dtype.kind in "biu" or ref.dtype == bool:
            if out.dtype.kind not in "biu" and out.dtype != bool:
                problems.append("%s: %s, onnxruntime's %s" %
                                (label, dtype, ref.dtype))
            elif not np.array_equal(out.astype(ref.dtype), ref):
                problems.append("%s: %d of %d values differ" %
                                (label, int(np.sum(out != ref)), ref.size))
            continue
        out64, ref64 = out.astype(np.float64), ref.astype(np.float64)
        if not np.all(np.isfinite(ref64)):
            raise Failure("%s: onnxruntime's reference is not finite" % label)
        scale = float(np.max(np.abs(ref64))) if ref.size else 0.0
        if scale == 0.0:
            raise Failure("%s: onnxruntime's reference is all zeros, which "
                          "proves nothing" % label)
        if not np.all(np.isfinite(out64)):
            problems.append("%s: %d values are not finite" %
                            (label, int(np.sum(~np.isfinite(out64)))))
            continue
        err = float(np.max(np.abs(out64 - ref64)))
        rel = err / scale
        worst = max(worst, rel)
        if err > TOLERANCE * scale:
            problems.append("%s: max |out - ref| %.3g > %g * max |ref| %.3g "
                            "(rel %.3g)" % (label, err, TOLERANCE, scale, rel))
    return worst, problems


def run_model_cases(cases, work):
    """Runs each (name, model, inputs) of cases with autopar-run (one rank)
    and onnxruntime, printing `NAME: match (max rel err X)` or what differs,
    then `N match, K failed`; returns the exit status (1 when one fails)."""
    os.makedirs(work, exist_ok=True)
    matched = failed = 0
    for name, model, inputs in cases:
        path = os.path.join(work, name + ".onnx")
        with open(path, "wb") as f:
            f.write(model.SerializeToString())
        try:
            outputs = run_autopar(name, path, {}, inputs, work, "")
            names, refs = run_ort(path, inputs)
            worst, problems = compare(outputs, names, refs)
        except (Failure, NotRun) as e:
            print("%s: ERROR: %s" % (name, e))
            failed += 1
            continue
        if problems:
            print("%s: MISMATCH %s" % (name, "; ".join(problems)))
            failed += 1
        else:
            print("%s: match (max rel err %.2g)" % (name, worst))
            matched += 1
        sys.stdout.flush()
    print("%d match, %d failed" % (matched, failed))
    return 1 if failed else 0


def read_outputs(out_dir):
    """The outputs a run wrote into out_dir (outputs.json and its files)."""
    try:
        with open(os.path.join(out_dir, "outputs.json")) as f:
            index = json.load(f)["outputs"]
    except (OSError, ValueError, KeyError) as e:
        raise Failure("autopar-run succeeded but wrote no outputs.json: %s"
                      % e)
    outputs = []
    for o in index:
        data = np.fromfile(os.path.join(out_dir, o["file"]),
                           dtype=AIR_TO_NUMPY[o["dtype"]])
        if data.size != int(np.prod(o["shape"], dtype=np.int64)):
            raise Failure("autopar-run: output '%s' has %d values for shape "
                          "%s" % (o["name"], data.size, o["shape"]))
        outputs.append((o["name"], o["dtype"], data.reshape(o["shape"])))
    return outputs


def run_parallel(name, onnx_path, dims, inputs, work, plan, options):
    """Plans the model for the `cpu` device with the pins `plan` (e.g.
    tp=2,pp=2), writes its forward programs and runs them under mpirun;
    returns the outputs of the rank that holds them (the last stage's
    first), or raises NotRun when the model cannot be planned so."""
    model = onnx.load(onnx_path)
    copy = os.path.join(work, name + ".external.onnx")
    onnx.save_model(model, copy, save_as_external_data=True,
                    all_tensors_to_one_file=True,
                    location=os.path.basename(copy) + ".data",
                    size_threshold=0)
    pins = dict(kv.split("=") for kv in plan.split(","))
    ranks = 1
    for key in ("tp", "pp", "dp"):
        ranks *= int(pins.get(key, 1))
    batch = [d for d in dims if "batch" in d]
    if "plan_batch" in options:
        # A dimension named batch that is not one (the model contracts it):
        # every symbol is bound, and the batch is the named input axis.
        batch_dim = options["plan_batch"]
        input_name, axis = batch_dim.rsplit(":", 1)
        batch_size = inputs[input_name].shape[int(axis)]
    elif len(batch) == 1:
        batch_dim, batch_size = batch[0], dims[batch[0]]
    else:
        # A model exported for one batch size: its first input's leading
        # dimension, named as INPUT:AXIS.
        first = next(iter(inputs.items()), None)
        if len(batch) > 1 or first is None or first[1].ndim == 0:
            raise NotRun("not planned: the model has no batch dimension")
        batch_dim, batch_size = first[0] + ":0", first[1].shape[0]
    plan_dir = os.path.join(work, name + ".plan")
    argv = ["autopar", copy, "--gpu", "cpu", "--gpus", str(ranks),
            "--batch-dim", batch_dim, "--global-batch", str(batch_size),
            "--fix", "%s,mbs=%d,schedule=gpipe" % (plan, batch_size),
            "-o", plan_dir, "--forward-programs"]
    for d, size in sorted(dims.items()):
        if d != batch_dim:
            argv += ["--dim", "%s=%d" % (d, size)]
    rc, out = run(argv, "autopar")
    if rc != 0:
        raise NotRun("not planned: " + first_error(out))
    out_dir = os.path.join(work, name + ".plan.out")
    argv = ["mpirun", "--oversubscribe", "-np", str(ranks), "autopar-run",
            "--eval", plan_dir, "--weights-dir", work, "-o", out_dir]
    for input_name, value in inputs.items():
        path = os.path.join(work, "%s.plan.%s.bin" % (
            name, re.sub(r"[^\w.-]", "_", input_name)))
        value.tofile(path)
        argv += ["--input", "%s=%s" % (input_name, path)]
    os.environ.setdefault("AUTOPAR_COMM_TIMEOUT", "60")
    rc, out = run(argv, "mpirun autopar-run")
    if rc != 0:
        raise Failure("mpirun autopar-run: " + first_error(out))
    for r in range(ranks):
        outputs = read_outputs(os.path.join(out_dir, "rank%d" % r))
        if outputs:
            return outputs
    raise Failure("no rank wrote outputs")


def check_model(entry, models_dir, work, plan=None):
    name, rel_path, dims, options = entry
    path = os.path.join(models_dir, rel_path)
    model = onnx.load(path, load_external_data=False)
    rng = np.random.default_rng(zlib.crc32(name.encode()))
    shapes = options.get("shapes", {})
    if shapes:
        set_shapes(model, shapes)
        path = os.path.join(work, name + ".onnx")
        onnx.save_model(model, path)
    specs = input_specs(model, dims, shapes)
    inputs = make_inputs(model, specs, options, rng)
    outputs = run_autopar(name, path, dims, inputs, work, "")
    if options.get("light"):
        # It runs with the runtime's own initialisation; now with the
        # seeded weights that onnxruntime reads too.
        model = onnx.load(path)
        seed_light_weights(model, rng)
        path = os.path.join(work, name + ".seeded.onnx")
        save_copy(model, path)
        outputs = run_autopar(name, path, dims, inputs, work, ".seeded")
    ref_names, refs = run_ort(path, inputs)
    result = compare(outputs, ref_names, refs)
    if plan is None:
        return result
    if result[1]:
        raise NotRun("not planned: the one-rank run does not match")
    outputs = run_parallel(name, path, dims, inputs, work, plan, options)
    return compare(outputs, ref_names, refs)


def main(argv):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--models", required=True,
                        help="the shared models folder")
    parser.add_argument("--work", required=True,
                        help="a folder for the programs, inputs and outputs")
    parser.add_argument("--plan", default=None,
                        help="instead of one rank, a plan pinned so (e.g. "
                        "tp=2,pp=2) on the `cpu` device under mpirun")
    parser.add_argument("names", nargs="*", help="models to check (all)")
    args = parser.parse_args(argv[1:])
    table = {entry[0]: entry for entry in MODELS}
    for n in args.names:
        if n not in table:
            parser.error("unknown model '%s'; known: %s" %
                         (n, ", ".join(table)))
    entries = [table[n] for n in args.names] if args.names else MODELS
    os.makedirs(args.work, exist_ok=True)
    counts = {"match": 0, "not run": 0, "failed": 0}
    for entry in entries:
        name = entry[0]
        work = os.path.join(args.work, name)
        os.makedirs(work, exist_ok=True)
        try:
            worst, problems = check_model(entry, args.models, work,
                                          args.plan)
            if problems:
                print("%s: MISMATCH %s" % (name, "; ".join(problems)))
                counts["failed"] += 1
            else:
                print("%s: match (max rel err %.2g)" % (name, worst))
                counts["match"] += 1
        except NotRun as e:
            print("%s: not run: %s" % (name, e))
            counts["not run"] += 1
        except Failure as e:
            print("%s: ERROR: %s" % (name, e))
            counts["failed"] += 1
        except Exception as e:  # a bug here, or a file the tools did not write
            print("%s: ERROR: %s: %s" % (name, type(e).__name__, e))
            counts["failed"] += 1
        sys.stdout.flush()
    print("%d match, %d not run, %d failed" %
          (counts["match"], counts["not run"], counts["failed"]))
    return 1 if counts["failed"] else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
