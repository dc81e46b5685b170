#!/usr/bin/env python3
"""PyTorch's side of the training-loop tests on the shared tiny exports
(../shared/models/torch_export): torch modules of their architectures
loaded with the exports' initializers, which reproduce the shared
references' losses and AdamW losses exactly; they train with
torch.optim.AdamW and torch.optim.lr_scheduler, and the losses and rates
of each step are written out.
- gpt2_tiny: fused qkv, tanh GELU, LayerNorm eps 1e-5, an untied head
  without bias.
- llama_tiny: RMSNorm eps 1e-6, rotary embeddings from the export's cos
  and sin tables (rotate-half), 4 query heads over 2 key/value heads,
  SwiGLU as x sigmoid(x) (the export's order), an untied head.

  torch_tiny_models.py schedules SHARED_MODELS_DIR OUT.json
  torch_tiny_models.py clip SHARED_MODELS_DIR OUT.json
  torch_tiny_models.py loss-scale SHARED_MODELS_DIR OUT.json

`schedules` writes lr_schedule.ref.json; `clip` writes clip_grad.ref.json:
five steps of AdamW and of SGD with torch.nn.utils.clip_grad_norm_ between
backward and step, each step's loss and the norm clip_grad_norm_ returns
(max_norm 0.1 clips every step, 1000 none), and that norm summed in f64.
`loss-scale` writes loss_scale.ref.json: five steps of dynamic loss scaling
as torch.cuda.amp.GradScaler (1.13) does it, written out with torch ops
(GradScaler disables itself without CUDA): the loss times the scale,
backward, the gradients times the scale's f32 reciprocal and checked for
infinities and NaNs, the step skipped on one (and the scale halved), else
taken (and the scale doubled after `growth_interval` such steps in a row).
init_scale 2**16, growth_interval 2, and step 3's loss times scale * inf
(autopar-run's AUTOPAR_TEST_INF_GRAD_STEP=3), so that the growth, the skip
and the backoff all happen; each step's loss, the scale it used and
whether it was skipped.

Needs PyTorch and onnx (Debian: python3-torch, python3-onnx); the tests
read OUT.json (checked in as lr_schedule.ref.json), not this script.
"""

import json
import math
import sys

import onnx
import torch
import torch.nn as nn
import torch.nn.functional as F
from onnx import numpy_helper

# Each case: the schedule's name, its autopar-run options, and the torch
# schedulers that should give the same rates.
STEPS = 5
LR, MIN_LR = 1e-3, 1e-4
CASES = {
    "cosine-warmup": "--lr-schedule cosine --warmup-steps 2 --min-lr 0.0001",
    "linear": "--lr-schedule linear --min-lr 0",
    "warmup": "--warmup-steps 3",
}


def gelu_tanh(x):
    return 0.5 * x * (1.0 + torch.tanh(
        math.sqrt(2.0 / math.pi) * (x + 0.044715 * torch.pow(x, 3.0))))


class Attention(nn.Module):
    def __init__(self, c, heads, n):
        super().__init__()
        self.heads = heads
        self.qkv = nn.Linear(c, 3 * c)
        self.proj = nn.Linear(c, c)
        self.register_buffer("causal",
                             torch.tril(torch.ones(n, n)).view(1, 1, n, n))

    def forward(self, x):
        b, s, c = x.shape
        d = c // self.heads
        q, k, v = (t.view(b, s, self.heads, d).transpose(1, 2)
                   for t in self.qkv(x).split(c, dim=2))
        att = (q @ k.transpose(-2, -1)) * (1.0 / math.sqrt(d))
        att = att.masked_fill(self.causal[:, :, :s, :s] == 0, float("-inf"))
        y = (F.softmax(att, dim=-1) @ v).transpose(1, 2).reshape(b, s, c)
        return self.proj(y)


class Block(nn.Module):
    def __init__(self, c, heads, n, ffn):
        super().__init__()
        self.ln1 = nn.LayerNorm(c)
        self.attn = Attention(c, heads, n)
        self.ln2 = nn.LayerNorm(c)
        self.fc = nn.Linear(c, ffn)
        self.out = nn.Linear(ffn, c)

    def forward(self, x):
        x = x + self.attn(self.ln1(x))
        return x + self.out(gelu_tanh(self.fc(self.ln2(x))))


class GPT2Tiny(nn.Module):
    def __init__(self, vocab=1000, c=64, heads=4, n=128, ffn=256, layers=2):
        super().__init__()
        self.wte = nn.Embedding(vocab, c)
        self.wpe = nn.Embedding(n, c)
        self.blocks = nn.ModuleList(
            [Block(c, heads, n, ffn) for _ in range(layers)])
        self.ln_f = nn.LayerNorm(c)
        self.head = nn.Linear(c, vocab, bias=False)

    def forward(self, ids):
        x = self.wte(ids) + self.wpe(torch.arange(ids.shape[1]).unsqueeze(0))
        for block in self.blocks:
            x = block(x)
        return self.head(self.ln_f(x))


class RMSNorm(nn.Module):
    def __init__(self, c):
        super().__init__()
        self.weight = nn.Parameter(torch.ones(c))

    def forward(self, x):
        return x * (1.0 / torch.sqrt(x.pow(2).mean(-1, keepdim=True) + 1e-6)) \
            * self.weight


def rotate_half(x):
    h = x.shape[-1] // 2
    return torch.cat((-x[..., h:], x[..., :h]), dim=-1)


class LlamaAttention(nn.Module):
    def __init__(self, c=64, heads=4, kv=2, n=128):
        super().__init__()
        self.heads, self.kv, self.d = heads, kv, c // heads
        self.q = nn.Linear(c, c, bias=False)
        self.k = nn.Linear(c, kv * self.d, bias=False)
        self.v = nn.Linear(c, kv * self.d, bias=False)
        self.o = nn.Linear(c, c, bias=False)
        self.register_buffer("cos", torch.zeros(n, self.d))
        self.register_buffer("sin", torch.zeros(n, self.d))
        self.register_buffer("causal", torch.zeros(n, n, dtype=torch.bool))

    def forward(self, x):
        b, t, c = x.shape
        q = self.q(x).view(b, t, self.heads, self.d).transpose(1, 2)
        k = self.k(x).view(b, t, self.kv, self.d).transpose(1, 2)
        v = self.v(x).view(b, t, self.kv, self.d).transpose(1, 2)
        cos, sin = self.cos[:t], self.sin[:t]
        q = q * cos + rotate_half(q) * sin
        k = k * cos + rotate_half(k) * sin
        rep = self.heads // self.kv
        k = k[:, :, None].expand(b, self.kv, rep, t, self.d).reshape(
            b, self.heads, t, self.d)
        v = v[:, :, None].expand(b, self.kv, rep, t, self.d).reshape(
            b, self.heads, t, self.d)
        att = (q @ k.transpose(-2, -1)) / math.sqrt(self.d)
        att = att.masked_fill(~self.causal[:t, :t], float("-inf"))
        y = (F.softmax(att, dim=-1) @ v).transpose(1, 2).reshape(b, t, c)
        return self.o(y)


class LlamaBlock(nn.Module):
    def __init__(self, c=64, ffn=172):
        super().__init__()
        self.n1 = RMSNorm(c)
        self.attn = LlamaAttention(c)
        self.n2 = RMSNorm(c)
        self.w1 = nn.Linear(c, ffn, bias=False)
        self.w3 = nn.Linear(c, ffn, bias=False)
        self.w2 = nn.Linear(ffn, c, bias=False)

    def forward(self, x):
        x = x + self.attn(self.n1(x))
        h = self.n2(x)
        g = self.w1(h)
        return x + self.w2(g * torch.sigmoid(g) * self.w3(h))


class LlamaTiny(nn.Module):
    def __init__(self, vocab=1000, c=64, layers=2):
        super().__init__()
        self.emb = nn.Embedding(vocab, c)
        self.blocks = nn.ModuleList([LlamaBlock() for _ in range(layers)])
        self.norm = RMSNorm(c)
        self.head = nn.Linear(c, vocab, bias=False)

    def forward(self, ids):
        x = self.emb(ids)
        for block in self.blocks:
            x = block(x)
        return self.head(self.norm(x))


# Per model: the module, and the names of its Linear weights in the order of
# the export's MatMul initializers.
MODELS = {
    "gpt2_tiny": (GPT2Tiny, [f"blocks.{b}.{m}.weight" for b in range(2)
                             for m in ("attn.qkv", "attn.proj", "fc", "out")]
                  + ["head.weight"]),
    "llama_tiny": (LlamaTiny, [f"blocks.{b}.{m}.weight" for b in range(2)
                               for m in ("attn.q", "attn.k", "attn.v",
                                         "attn.o", "w1", "w3", "w2")]
                   + ["head.weight"]),
}


def load(model_name, onnx_path):
    """The module with the export's initializers: the MatMul weights in
    order (transposed: a MatMul's [in, out] is a Linear's [out, in]), the
    named ones by name, and those the exporter deduplicated (equal initial
    values: norms, masks, rotary tables) from block 0's."""
    graph = onnx.load(onnx_path).graph
    inits = {i.name: torch.from_numpy(numpy_helper.to_array(i).copy())
             for i in graph.initializer}
    make, names = MODELS[model_name]
    model = make()
    mats = sorted((k for k in inits if k.startswith("onnx::MatMul_")),
                  key=lambda k: int(k.rsplit("_", 1)[1]))
    state = {n: inits[k].t().contiguous() for n, k in zip(names, mats)}
    own = model.state_dict()
    for name in own:
        if name in state:
            continue
        if name in inits:
            state[name] = inits[name]
            continue
        module, leaf = name.rsplit(".", 1)
        if leaf in ("causal", "cos", "sin"):
            source = "blocks.0.attn." + leaf
        elif model_name == "gpt2_tiny":
            source = "blocks.0.ln1." + leaf
        else:
            source = "blocks.0.n1.weight"
        state[name] = inits[source].to(own[name].dtype)
    model.load_state_dict(state)
    return model


def schedulers(name, opt):
    lin = torch.optim.lr_scheduler.LinearLR
    if name == "cosine-warmup":
        warm = lin(opt, start_factor=1 / 2, end_factor=1.0, total_iters=1)
        decay = torch.optim.lr_scheduler.CosineAnnealingLR(
            opt, T_max=STEPS - 2, eta_min=MIN_LR)
        return torch.optim.lr_scheduler.SequentialLR(opt, [warm, decay], [2])
    if name == "linear":
        return lin(opt, start_factor=1.0, end_factor=0.0, total_iters=STEPS)
    if name == "warmup":
        return lin(opt, start_factor=1 / 3, end_factor=1.0, total_iters=2)
    raise ValueError(name)


def step_loss(model, ids):
    logits = model(ids)
    return F.cross_entropy(logits[:, :-1].reshape(-1, logits.shape[-1]),
                           ids[:, 1:].reshape(-1))


# Clipping cases: the optimizer, its rate, max_norm, and the autopar-run
# options that should give the same steps.
CLIP_CASES = {
    "adamw-clip": ("adamw", 1e-3, 0.1,
                   "--lr 0.001 --weight-decay 0 --clip-grad 0.1"),
    "adamw-noclip": ("adamw", 1e-3, 1000.0,
                     "--lr 0.001 --weight-decay 0 --clip-grad 1000"),
    "sgd-clip": ("sgd", 0.5, 0.1,
                 "--optimizer sgd --lr 0.5 --weight-decay 0 --clip-grad 0.1"),
}


def make_optimizer(kind, lr, model):
    """AdamW (autopar-run's betas and eps) or SGD, without weight decay."""
    if kind == "adamw":
        return torch.optim.AdamW(model.parameters(), lr=lr,
                                 betas=(0.9, 0.999), eps=1e-8,
                                 weight_decay=0.0)
    return torch.optim.SGD(model.parameters(), lr=lr, weight_decay=0.0)


def clip_cases(model_name, onnx_path, ids):
    cases = {}
    for name, (kind, lr, max_norm, options) in CLIP_CASES.items():
        model = load(model_name, onnx_path)
        opt = make_optimizer(kind, lr, model)
        losses, norms, exact = [], [], []
        for _ in range(STEPS):
            opt.zero_grad()
            loss = step_loss(model, ids)
            losses.append(loss.item())
            loss.backward()
            # The same gradients' norm summed in f64: clip_grad_norm_'s f32
            # torch.norm is itself off by about 2e-6 on these models.
            exact.append(math.sqrt(sum(
                float((p.grad.double() ** 2).sum())
                for p in model.parameters())))
            norm = torch.nn.utils.clip_grad_norm_(model.parameters(),
                                                  max_norm)
            norms.append(norm.item())
            opt.step()
        cases[name] = {"options": options, "max_norm": max_norm,
                       "losses": losses, "grad_norms": norms,
                       "grad_norms_f64": exact}
    return cases


# Loss-scaling cases: the optimizer, its rate, max_norm (None: no
# clipping), and the autopar-run options (with AUTOPAR_TEST_INF_GRAD_STEP=3)
# that should give the same steps.
SCALE_CASES = {
    "adamw-dynamic": ("adamw", 1e-3, None,
                      "--lr 0.001 --weight-decay 0 --loss-scale dynamic "
                      "--loss-scale-window 2"),
    "adamw-dynamic-clip": ("adamw", 1e-3, 0.1,
                           "--lr 0.001 --weight-decay 0 --clip-grad 0.1 "
                           "--loss-scale-window 2"),
    "sgd-dynamic": ("sgd", 0.5, None,
                    "--optimizer sgd --lr 0.5 --weight-decay 0 "
                    "--loss-scale-window 2"),
}
INIT_SCALE, GROWTH_INTERVAL, INF_STEP = 2.0 ** 16, 2, 3


def loss_scale_cases(model_name, onnx_path, ids):
    cases = {}
    for name, (kind, lr, max_norm, options) in SCALE_CASES.items():
        model = load(model_name, onnx_path)
        opt = make_optimizer(kind, lr, model)
        # GradScaler's state: an f32 scale and the growth tracker.
        scale = torch.full((), INIT_SCALE, dtype=torch.float32)
        tracker = 0
        losses, scales, skipped = [], [], []
        for step in range(1, STEPS + 1):
            opt.zero_grad()
            loss = step_loss(model, ids)
            losses.append(loss.item())
            scales.append(scale.item())
            # scaler.scale(loss).backward(); the hook's step overflows.
            used = scale * math.inf if step == INF_STEP else scale
            (loss * used).backward()
            # scaler.unscale_(opt): _amp_foreach_non_finite_check_and_unscale_
            inv_scale = scale.double().reciprocal().float()
            found_inf = False
            for p in model.parameters():
                found_inf |= not bool(torch.isfinite(p.grad).all())
                p.grad.mul_(inv_scale)
            if max_norm is not None:
                torch.nn.utils.clip_grad_norm_(model.parameters(), max_norm)
            # scaler.step(opt): skipped on an overflow.
            if not found_inf:
                opt.step()
            skipped.append(found_inf)
            # scaler.update(): _amp_update_scale_.
            if found_inf:
                scale = scale * 0.5
                tracker = 0
            else:
                tracker += 1
                if tracker == GROWTH_INTERVAL:
                    scale = scale * 2.0
                    tracker = 0
        cases[name] = {"options": options, "init_scale": INIT_SCALE,
                       "growth_interval": GROWTH_INTERVAL,
                       "inf_step": INF_STEP, "losses": losses,
                       "loss_scales": scales, "skipped": skipped}
    return cases


def main(argv):
    command, shared, out_path = argv[1], argv[2], argv[3]
    if command not in ("schedules", "clip", "loss-scale"):
        sys.exit("usage: torch_tiny_models.py schedules|clip|loss-scale "
                 "SHARED OUT.json")
    torch.set_num_threads(1)
    result = {"steps": STEPS, "lr": LR,
              "computed_by": "torch %s, AdamW(betas=(0.9, 0.999), eps=1e-8, "
                             "weight_decay=0), the reference batch every "
                             "step; loss before each step" % torch.__version__
                             + ("; clip_grad_norm_(model.parameters(), "
                                "max_norm) before each step, its norm"
                                if command == "clip" else "")
                             + ("; GradScaler's dynamic loss scaling in torch "
                                "ops (init_scale 2**16, growth_interval 2, "
                                "step 3's loss times inf)"
                                if command == "loss-scale" else ""),
              "models": {}}
    for model_name in MODELS:
        ref_path = "%s/torch_export/reference/%s.ref.json" % (shared,
                                                               model_name)
        with open(ref_path) as f:
            ref = json.load(f)
        ids = torch.tensor(ref["input_ids"])
        onnx_path = "%s/torch_export/%s_opset17.onnx" % (shared, model_name)
        # The module must give the shared reference's AdamW losses bit for
        # bit before its numbers mean anything.
        model = load(model_name, onnx_path)
        opt = torch.optim.AdamW(model.parameters(), lr=ref["adamw"]["lr"],
                                betas=(0.9, 0.999), eps=1e-8, weight_decay=0.0)
        got = []
        for _ in range(3):
            opt.zero_grad()
            logits = model(ids)
            loss = F.cross_entropy(
                logits[:, :-1].reshape(-1, logits.shape[-1]),
                ids[:, 1:].reshape(-1))
            got.append(loss.item())
            loss.backward()
            opt.step()
        if got != ref["adamw"]["losses_steps_0_1_2"]:
            sys.exit("%s: the torch module's losses %s are not the shared "
                     "reference's %s" % (model_name, got,
                                         ref["adamw"]["losses_steps_0_1_2"]))
        if command == "clip":
            result["models"][model_name] = clip_cases(model_name,
                                                      onnx_path, ids)
            continue
        if command == "loss-scale":
            result["models"][model_name] = loss_scale_cases(model_name,
                                                            onnx_path, ids)
            continue
        cases = {}
        for name, options in CASES.items():
            model = load(model_name, onnx_path)
            opt = torch.optim.AdamW(model.parameters(), lr=LR,
                                    betas=(0.9, 0.999), eps=1e-8,
                                    weight_decay=0.0)
            sched = schedulers(name, opt)
            losses, rates = [], []
            for _ in range(STEPS):
                opt.zero_grad()
                logits = model(ids)
                loss = F.cross_entropy(
                    logits[:, :-1].reshape(-1, logits.shape[-1]),
                    ids[:, 1:].reshape(-1))
                rates.append(opt.param_groups[0]["lr"])
                losses.append(loss.item())
                loss.backward()
                opt.step()
                sched.step()
            cases[name] = {"options": options, "losses": losses,
                           "lrs": rates}
        result["models"][model_name] = cases
    with open(out_path, "w") as f:
        json.dump(result, f, indent=1)
        f.write("\n")


if __name__ == "__main__":
    main(sys.argv)
