#!/usr/bin/env python3
"""PyTorch's side of the training-loop tests on the shared gpt2_tiny export
(../shared/models/torch_export): a torch module of its architecture (fused
qkv, tanh GELU, LayerNorm eps 1e-5, an untied head without bias) loaded
with the export's initializers, which reproduces the shared reference's
loss and AdamW losses exactly, trains with torch.optim.AdamW and
torch.optim.lr_scheduler, and writes the losses and rates of each step.

  torch_gpt2_tiny.py schedules SHARED_MODELS_DIR OUT.json

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


def load(onnx_path):
    """The module with the export's initializers: the MatMul weights in
    order are each block's qkv, proj, fc and out, then the head
    (transposed: a MatMul's [in, out] is a Linear's [out, in]); the
    LayerNorms the exporter deduplicated start from block 0's values."""
    graph = onnx.load(onnx_path).graph
    inits = {i.name: torch.from_numpy(numpy_helper.to_array(i).copy())
             for i in graph.initializer}
    model = GPT2Tiny()
    mats = sorted((k for k in inits if k.startswith("onnx::MatMul_")),
                  key=lambda k: int(k.rsplit("_", 1)[1]))
    names = [f"blocks.{b}.{m}.weight" for b in range(2)
             for m in ("attn.qkv", "attn.proj", "fc", "out")] + ["head.weight"]
    state = {n: inits[k].t().contiguous() for n, k in zip(names, mats)}
    for name in model.state_dict():
        if name in state:
            continue
        if name in inits:
            state[name] = inits[name]
        elif name.endswith("causal"):
            state[name] = inits["blocks.0.attn.causal"]
        else:
            state[name] = inits["blocks.0.ln1." + name.rsplit(".", 1)[1]]
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


def main(argv):
    shared, out_path = argv[2], argv[3]
    ref_path = shared + "/torch_export/reference/gpt2_tiny.ref.json"
    with open(ref_path) as f:
        ids = torch.tensor(json.load(f)["input_ids"])
    torch.set_num_threads(1)
    result = {"model": "gpt2_tiny_opset17.onnx", "steps": STEPS, "lr": LR,
              "computed_by": "torch %s, AdamW(betas=(0.9, 0.999), eps=1e-8, "
                             "weight_decay=0), same batch every step; loss "
                             "before each step" % torch.__version__,
              "cases": {}}
    for name, options in CASES.items():
        model = load(shared + "/torch_export/gpt2_tiny_opset17.onnx")
        opt = torch.optim.AdamW(model.parameters(), lr=LR, betas=(0.9, 0.999),
                                eps=1e-8, weight_decay=0.0)
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
        result["cases"][name] = {"options": options, "losses": losses,
                                 "lrs": rates}
    with open(out_path, "w") as f:
        json.dump(result, f, indent=1)
        f.write("\n")


if __name__ == "__main__":
    main(sys.argv)
