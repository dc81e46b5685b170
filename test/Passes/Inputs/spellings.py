#!/usr/bin/python3
# Writes one transformer block of a GPT and of a Llama, each spelled several
# ways as exporters spell the same computation, and checks that autopar's
# fusions make the same canonical IR of every spelling and that the planner
# predicts the same step time (docs/Passes.md, "Fusion by meaning").
#
# Usage: spellings.py --bin BUILD/bin --out DIR
#
# The graphs are built with tools/autopar-modelgen's Graph (torch.onnx's
# naming); parameters, inputs and outputs are named alike in every spelling,
# so the canonical IR of two spellings is compared after renaming every other
# value in order of definition and dropping node names. Needs Debian's
# python3-onnx (run with /usr/bin/python3).
"""Check that every spelling of a block fuses to the same canonical IR."""

import argparse
import importlib.machinery
import importlib.util
import json
import math
import os
import re
import subprocess
import sys

from onnx import TensorProto, helper

HERE = os.path.dirname(os.path.abspath(__file__))
MODELGEN = os.path.join(HERE, "..", "..", "..", "tools", "autopar-modelgen")


def load_modelgen():
    loader = importlib.machinery.SourceFileLoader("modelgen", MODELGEN)
    spec = importlib.util.spec_from_loader("modelgen", loader)
    module = importlib.util.module_from_spec(spec)
    loader.exec_module(module)
    return module


mg = load_modelgen()

HIDDEN, HEADS, FFN, VOCAB, MAX_POS = 64, 4, 256, 128, 32
HD = HIDDEN // HEADS  # 16: 1/sqrt(16) and 16^(1/4) are exact.
NEG_INF = float("-inf")


# -- pieces with several spellings ---------------------------------------

def inline_tensor(g, name, dt, dims, values):
    """A buffer held inline in the model (a registered torch buffer)."""
    t = helper.make_tensor(name, dt, dims, values)
    g.initializers.append(t)
    return name


def causal_buffer(g, form):
    """The [1, 1, MAX_POS, MAX_POS] causal buffer of GPT-2 (`bias`), inline:
    bool keep-where-true, float 1/0, or an additive 0/-inf bias."""
    vals = []
    for i in range(MAX_POS):
        for j in range(MAX_POS):
            keep = j <= i
            if form == "bool":
                vals.append(keep)
            elif form == "float":
                vals.append(1.0 if keep else 0.0)
            else:
                vals.append(0.0 if keep else NEG_INF)
    dt = TensorProto.BOOL if form == "bool" else TensorProto.FLOAT
    return inline_tensor(g, "attn.bias_" + form, dt, [1, 1, MAX_POS, MAX_POS],
                         vals)


def slice_to_sequence(g, scope, buf, ids):
    """bias[:, :, :S, :S] as torch exports it: two Slices by Shape(ids)[1]."""
    s = g.dim(scope, ids, 1)[1]
    a = g.node(scope, "Slice", [buf, g.i64([0]), s, g.i64([2]), g.i64([1])])
    return g.node(scope, "Slice", [a, g.i64([0]), s, g.i64([3]),
                                   g.i64([1])])


def mask_scores(g, scope, sc, ids, form):
    """Masks the scores so that position i sees j <= i only."""
    if form == "where-tril-min":  # HF GPT-2: Where(tril, s, finfo.min)
        m = mg.causal_mask(g, scope, ids)
        return g.node(scope, "Where", [m, sc, g.f(g.dtype_min())])
    if form == "where-not-cast":  # Where(Not(Cast(bias)), -inf, s)
        m = slice_to_sequence(g, scope, causal_buffer(g, "bool"), ids)
        n = g.node(scope, "Not", [m])
        c = g.node(scope, "Cast", [n], to=TensorProto.BOOL)
        return g.node(scope, "Where", [c, g.f(NEG_INF), sc])
    if form == "where-equal-zero":  # masked_fill(bias == 0, -inf)
        m = slice_to_sequence(g, scope, causal_buffer(g, "float"), ids)
        e = g.node(scope, "Equal", [m, g.f(0.0)])
        return g.node(scope, "Where", [e, g.f(NEG_INF), sc])
    if form == "additive":  # scores + bias, the bias 0 or -inf
        m = slice_to_sequence(g, scope, causal_buffer(g, "additive"), ids)
        return g.node(scope, "Add", [sc, m])
    if form == "masked-fill-not":  # masked_fill(~tril, -inf)
        m = mg.causal_mask(g, scope, ids)
        n = g.node(scope, "Not", [m])
        return g.node(scope, "Where", [n, g.f(NEG_INF), sc])
    raise ValueError(form)


def attention(g, scope, q, k, v, ids, sp):
    """q, k, v: [B, S, H] projections. Returns the merged context [B, S, H]
    before the output projection."""
    qh = mg.split_heads(g, scope, q, HEADS, HD)
    vh = mg.split_heads(g, scope, v, HEADS, HD)
    scale = sp["scale"]
    if scale == "q-mul":
        qh = g.node(scope, "Mul", [qh, g.f(1 / math.sqrt(HD))])
    elif scale == "qk-div":  # Megatron's GPT-2: q and k by d^(1/4)
        qh = g.node(scope, "Div", [qh, g.f(math.sqrt(math.sqrt(HD)))])
    if sp["k"] == "perm-0231":  # one Transpose to [B, heads, d, S]
        kt = mg.split_heads(g, scope, k, HEADS, HD, k_transposed=True)
    else:  # transpose(1, 2), then transpose(-2, -1)
        kh = mg.split_heads(g, scope, k, HEADS, HD)
        if scale == "k-mul":
            kh = g.node(scope, "Mul", [g.f(1 / math.sqrt(HD)), kh])
        kt = g.node(scope, "Transpose", [kh], perm=[0, 1, 3, 2])
    if scale == "qk-div":
        kt = g.node(scope, "Div", [kt, g.f(math.sqrt(math.sqrt(HD)))])
    sc = g.node(scope, "MatMul", [qh, kt])
    if scale == "scores-div":
        sc = g.node(scope, "Div", [sc, g.f(math.sqrt(HD))])
    elif scale == "scores-mul":
        sc = g.node(scope, "Mul", [sc, g.f(1 / math.sqrt(HD))])
    sc = mask_scores(g, scope, sc, ids, sp["mask"])
    if sp.get("softmax-casts"):
        sc = g.node(scope, "Cast", [sc], to=TensorProto.FLOAT)
    pr = g.node(scope, "Softmax", [sc], axis=-1)
    if sp.get("softmax-casts"):
        pr = g.node(scope, "Cast", [pr], to=TensorProto.FLOAT)
    ctx = g.node(scope, "MatMul", [pr, vh])
    return mg.merge_heads(g, scope, ctx, q, HIDDEN)


def gelu_tanh(g, scope, x, form):
    """GELU's tanh approximation, 0.5 x (1 + tanh(c (x + 0.044715 x^3)))."""
    if form == "pow":
        return mg.gelu_tanh(g, scope, x)
    # x * 0.5 * (1 + tanh(c * (x + 0.044715 * x * x * x))), factors swapped.
    x2 = g.node(scope, "Mul", [x, x])
    x3 = g.node(scope, "Mul", [x2, x])
    m = g.node(scope, "Mul", [x3, g.f(0.044715)])
    a = g.node(scope, "Add", [m, x])
    m2 = g.node(scope, "Mul", [a, g.f(math.sqrt(2.0 / math.pi))])
    t = g.node(scope, "Tanh", [m2])
    a2 = g.node(scope, "Add", [t, g.f(1.0)])
    h = g.node(scope, "Mul", [x, g.f(0.5)])
    return g.node(scope, "Mul", [a2, h])


def rms_norm(g, scope, pname, x, form):
    """x / sqrt(mean(x^2) + eps) * weight, spelled three ways."""
    eps = 1e-6
    if form == "pow-reciprocal":
        return mg.rms_norm(g, scope, pname, x, HIDDEN, eps)
    w = g.param(pname + ".weight", [HIDDEN])
    if form == "mul-div":
        p = g.node(scope, "Mul", [x, x])
        m = g.node(scope, "ReduceMean", [p], axes=[-1], keepdims=1)
        a = g.node(scope, "Add", [g.f(eps), m])
        s = g.node(scope, "Sqrt", [a])
        y = g.node(scope, "Div", [x, s])
        return g.node(scope, "Mul", [y, w])
    # Pow, then the reciprocal square root multiplied from the left.
    p = g.node(scope, "Pow", [x, g.f(2.0)])
    m = g.node(scope, "ReduceMean", [p], axes=[-1], keepdims=1)
    a = g.node(scope, "Add", [m, g.f(eps)])
    s = g.node(scope, "Sqrt", [a])
    r = g.node(scope, "Reciprocal", [s])
    y = g.node(scope, "Mul", [r, x])
    return g.node(scope, "Mul", [y, w])


def swiglu(g, scope, pname, x, form):
    """down(silu(gate(x)) * up(x)), with the factors in either order."""
    gp = g.linear(scope + "/gate_proj", pname + ".gate_proj", x, HIDDEN, FFN,
                  bias=False)
    up = g.linear(scope + "/up_proj", pname + ".up_proj", x, HIDDEN, FFN,
                  bias=False)
    sg = g.node(scope + "/act_fn", "Sigmoid", [gp])
    if form == "silu-up":
        act = g.node(scope + "/act_fn", "Mul", [gp, sg])
        m = g.node(scope, "Mul", [act, up])
    else:
        act = g.node(scope + "/act_fn", "Mul", [sg, gp])
        m = g.node(scope, "Mul", [up, act])
    return g.linear(scope + "/down_proj", pname + ".down_proj", m, FFN,
                    HIDDEN, bias=False)


# -- blocks ----------------------------------------------------------------

def embed(name, table):
    """A graph over input_ids and their embedding: (graph, ids, x)."""
    g = mg.Graph(name + "_block", "f32", name + ".weights")
    g.add_input("input_ids", TensorProto.INT64, ["batch", "sequence"])
    emb = g.param(table + ".weight", [VOCAB, HIDDEN])
    return g, "input_ids", g.node("/" + table, "Gather", [emb, "input_ids"])


def finish(g, x):
    """The untied head and the logits output."""
    logits = g.linear("/lm_head", "lm_head", x, HIDDEN, VOCAB, bias=False)
    g.add_output(logits, "logits", g.dtype, ["batch", "sequence", VOCAB])
    return g


def build_gpt(sp):
    g, ids, x = embed("gpt", "wte")
    s, p = "/h.0", "h.0"
    h = mg.layer_norm(g, s + "/ln_1", p + ".ln_1", x, HIDDEN, 1e-5)
    qkv = g.linear(s + "/attn/c_attn", p + ".attn.c_attn", h, HIDDEN,
                   3 * HIDDEN)
    q, k, v = g.node(s + "/attn", "Split", [qkv, g.i64([HIDDEN] * 3)], 3,
                     axis=2)
    o = attention(g, s + "/attn", q, k, v, ids, sp)
    o = g.linear(s + "/attn/c_proj", p + ".attn.c_proj", o, HIDDEN, HIDDEN)
    x = g.node(s, "Add", [o, x])
    h = mg.layer_norm(g, s + "/ln_2", p + ".ln_2", x, HIDDEN, 1e-5)
    h = g.linear(s + "/mlp/c_fc", p + ".mlp.c_fc", h, HIDDEN, FFN)
    h = gelu_tanh(g, s + "/mlp/act", h, sp["gelu"])
    h = g.linear(s + "/mlp/c_proj", p + ".mlp.c_proj", h, FFN, HIDDEN)
    return finish(g, g.node(s, "Add", [x, h]))


def build_llama(sp):
    g, ids, x = embed("llama", "embed_tokens")
    s, p = "/layers.0", "layers.0"
    h = rms_norm(g, s + "/input_layernorm", p + ".input_layernorm", x,
                 sp["rms"])
    sa, pa = s + "/self_attn", p + ".self_attn"
    q = g.linear(sa + "/q_proj", pa + ".q_proj", h, HIDDEN, HIDDEN, False)
    k = g.linear(sa + "/k_proj", pa + ".k_proj", h, HIDDEN, HIDDEN, False)
    v = g.linear(sa + "/v_proj", pa + ".v_proj", h, HIDDEN, HIDDEN, False)
    o = attention(g, sa, q, k, v, ids, sp)
    o = g.linear(sa + "/o_proj", pa + ".o_proj", o, HIDDEN, HIDDEN, False)
    x = g.node(s, "Add", [x, o])
    h = rms_norm(g, s + "/post_attention_layernorm",
                 p + ".post_attention_layernorm", x, sp["rms"])
    h = swiglu(g, s + "/mlp", p + ".mlp", h, sp["swiglu"])
    return finish(g, g.node(s, "Add", [x, h]))


GPT_SPELLINGS = [
    # tools/autopar-modelgen's (Hugging Face GPT-2).
    dict(mask="where-tril-min", scale="scores-div", k="perm-0231",
         gelu="pow"),
    # torch's own export of a minGPT-style block.
    dict(mask="where-not-cast", scale="scores-mul", k="perm-0231",
         gelu="pow"),
    dict(mask="where-equal-zero", scale="q-mul", k="twice", gelu="mul"),
    dict(mask="additive", scale="qk-div", k="twice", gelu="pow"),
    dict(mask="masked-fill-not", scale="k-mul", k="twice", gelu="mul",
         **{"softmax-casts": True}),
    dict(mask="where-not-cast", scale="scores-div", k="twice", gelu="mul",
         **{"softmax-casts": True}),
]

LLAMA_SPELLINGS = [
    dict(mask="where-tril-min", scale="scores-div", k="twice",
         rms="pow-reciprocal", swiglu="silu-up"),
    dict(mask="where-not-cast", scale="q-mul", k="perm-0231", rms="mul-div",
         swiglu="up-silu"),
    dict(mask="additive", scale="scores-mul", k="twice",
         rms="reciprocal-left", swiglu="up-silu"),
]


# -- checking ---------------------------------------------------------------

NAME = re.compile(r'%("(?:[^"\\]|\\.)*"|[A-Za-z0-9_./-]+)')


def normalize(ir, keep):
    """Renames values not in keep (parameters, inputs) in order of first
    appearance and drops locations, so that spellings compare."""
    names = {}

    def rename(m):
        n = m.group(1).strip('"')
        if n in keep:
            return "%" + n
        return "%%v%d" % names.setdefault(n, len(names))
    out = []
    for line in ir.splitlines():
        line = re.sub(r' loc\("(?:[^"\\]|\\.)*"\)', "", line)
        out.append(NAME.sub(rename, line))
    return "\n".join(out)


def tool(args, name):
    return os.path.join(args.bin, name) if args.bin else name


def run(cmd):
    r = subprocess.run(cmd, capture_output=True, text=True)
    if r.returncode != 0:
        sys.exit("spellings: %s failed (%d):\n%s" % (" ".join(cmd),
                                                     r.returncode, r.stderr))
    return r.stdout


def check(family, spellings, build, args):
    dims = ["--dim", "batch=2", "--dim", "sequence=16"]
    ref_ir, ref_step, ok = None, None, True
    for i, sp in enumerate(spellings):
        path = os.path.join(args.out, "%s-%d.onnx" % (family, i))
        g = build(sp)
        with open(path, "wb") as f:
            f.write(g.model().SerializeToString())
        # The weights, zeros (--load-weights reads them; fusions read only
        # the inline buffers).
        with open(os.path.join(args.out, g.location), "wb") as f:
            f.truncate(g.offset)
        # Bound as the planner binds them, and symbolic as autopar-opt
        # shows a model.
        ir = ""
        for bind in (dims, []):
            text = run([tool(args, "autopar-opt"), path,
                        "--load-weights", "--passes=import-canonical"] + bind)
            keep = set(re.findall(r"param %([\w.]+)", text)) | {"input_ids"}
            ir += normalize(text, keep) + "\n"

        with open(path[:-5] + ".air", "w") as f:
            f.write(ir + "\n")
        plan_dir = path[:-5] + ".plan"
        run([tool(args, "autopar"), path, "--gpus", "8", "--gpu",
             "h100", "--global-batch", "64", "--dim", "sequence=16", "-o",
             plan_dir])
        with open(os.path.join(plan_dir, "plan.json")) as f:
            step = json.load(f)["plan"]["step_time_s"]
        fused = ",".join(sorted(set(re.findall(
            r"= (Attention|LayerNormalization|RMSNormalization|Gelu|SwiGLU|"
            r"Silu|Linear)\(", ir))))
        same_ir = ref_ir is None or ir == ref_ir
        diff = 0.0 if ref_step is None else abs(step / ref_step - 1)
        print("%s spelling %d: %s; step %.6g s (%+.3f%%); IR %s; fused %s" %
              (family, i, ", ".join("%s=%s" % kv for kv in sorted(sp.items())),
               step, 100 * diff, "same" if same_ir else "DIFFERS", fused))
        if ref_ir is None:
            ref_ir, ref_step = ir, step
        ok &= same_ir and diff <= 0.005
    return ok


def main():
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--bin", default="",
                    help="folder of the autopar tools (default: from PATH)")
    ap.add_argument("--out", required=True, help="folder for the models")
    args = ap.parse_args()
    os.makedirs(args.out, exist_ok=True)
    ok = check("gpt", GPT_SPELLINGS, build_gpt, args)
    ok &= check("llama", LLAMA_SPELLINGS, build_llama, args)
    print("%d GPT and %d Llama spellings: %s" % (
        len(GPT_SPELLINGS), len(LLAMA_SPELLINGS),
        "one canonical IR each" if ok else "MISMATCH"))
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
