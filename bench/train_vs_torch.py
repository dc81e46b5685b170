#!/usr/bin/python3
"""Training step time of autopar-run against PyTorch on the CPU, same model.

Builds a seeded tiny GPT in torch (learned positions, pre-LayerNorm blocks,
causal attention written as matmul/softmax, GELU MLP, untied LM head),
exports it to ONNX (opset 17, weights inline), compiles it with
`autopar-opt --passes=import-canonical,autodiff,insert-optimizer` and times
`autopar-run` and torch training on the same fixed batch: AdamW (lr 1e-3,
weight decay 0), next-token cross-entropy (mean over batch*(seq-1)),
median step time after a warm-up, for each thread count (torch's intra-op
threads and OpenBLAS's, which autopar-run's --threads sets). Prints per
thread count the ms/step of each, the ratio autopar/torch, tokens/s, CPU
ms/step, and the losses of the first and last steps (the same weights and
batch: they agree to ~1e-7 relative; over 1e-4 prints a WARNING).

Run through bench/train-vs-torch.sh, which checks for (and with --install
installs) Debian's python3-torch, and runs this with /usr/bin/python3.
"""

import argparse
import ctypes
import math
import os
import re
import resource
import statistics
import subprocess
import sys
import tempfile
import time
import warnings

import torch
import torch.nn as nn
import torch.nn.functional as F


class Block(nn.Module):
    def __init__(self, hidden, heads, ffn, seq):
        super().__init__()
        self.heads = heads
        self.ln1 = nn.LayerNorm(hidden)
        self.q = nn.Linear(hidden, hidden)
        self.k = nn.Linear(hidden, hidden)
        self.v = nn.Linear(hidden, hidden)
        self.proj = nn.Linear(hidden, hidden)
        self.ln2 = nn.LayerNorm(hidden)
        self.fc1 = nn.Linear(hidden, ffn)
        self.fc2 = nn.Linear(ffn, hidden)
        mask = torch.full((seq, seq), float("-inf")).triu(1)
        # A persistent buffer exports as an initializer (a Constant node of
        # over 4096 floats would import as a parameter without data).
        self.register_buffer("mask", mask)

    def forward(self, x):
        b, s, h = x.shape
        d = h // self.heads
        y = self.ln1(x)

        def split(t):
            return t.view(b, s, self.heads, d).transpose(1, 2)

        q, k, v = split(self.q(y)), split(self.k(y)), split(self.v(y))
        scores = q @ k.transpose(-2, -1) * (1.0 / math.sqrt(d))
        scores = scores + self.mask[:s, :s]
        att = torch.softmax(scores, dim=-1) @ v
        x = x + self.proj(att.transpose(1, 2).reshape(b, s, h))
        return x + self.fc2(F.gelu(self.fc1(self.ln2(x))))


class TinyGPT(nn.Module):
    def __init__(self, a):
        super().__init__()
        self.tok = nn.Embedding(a.vocab, a.hidden)
        self.pos = nn.Embedding(a.seq, a.hidden)
        self.blocks = nn.ModuleList(
            Block(a.hidden, a.heads, a.ffn, a.seq) for _ in range(a.layers))
        self.ln_f = nn.LayerNorm(a.hidden)
        self.head = nn.Linear(a.hidden, a.vocab, bias=False)

    def forward(self, input_ids):
        s = input_ids.shape[1]
        pos = torch.arange(s, device=input_ids.device)
        x = self.tok(input_ids) + self.pos(pos)
        for block in self.blocks:
            x = block(x)
        return self.head(self.ln_f(x))


class RMSNorm(nn.Module):
    def __init__(self, hidden, eps):
        super().__init__()
        self.eps = eps
        self.weight = nn.Parameter(torch.ones(hidden))

    def forward(self, x):
        return x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + self.eps) \
            * self.weight


def rotate(x, cos, sin):
    half = x.shape[-1] // 2
    rotated = torch.cat((-x[..., half:], x[..., :half]), dim=-1)
    return x * cos + rotated * sin


class LlamaBlock(nn.Module):
    """A Llama block: RMSNorm, grouped-query attention with rotary
    embeddings, a SwiGLU MLP; no biases."""

    def __init__(self, hidden, heads, kv_heads, ffn, eps):
        super().__init__()
        self.heads, self.kv_heads = heads, kv_heads
        d = hidden // heads
        self.n1, self.n2 = RMSNorm(hidden, eps), RMSNorm(hidden, eps)
        self.q = nn.Linear(hidden, hidden, bias=False)
        self.k = nn.Linear(hidden, kv_heads * d, bias=False)
        self.v = nn.Linear(hidden, kv_heads * d, bias=False)
        self.o = nn.Linear(hidden, hidden, bias=False)
        self.gate = nn.Linear(hidden, ffn, bias=False)
        self.up = nn.Linear(hidden, ffn, bias=False)
        self.down = nn.Linear(ffn, hidden, bias=False)

    def forward(self, x, cos, sin, mask):
        b, s, h = x.shape
        d = h // self.heads
        y = self.n1(x)
        q = self.q(y).view(b, s, self.heads, d).transpose(1, 2)
        k = self.k(y).view(b, s, self.kv_heads, d).transpose(1, 2)
        v = self.v(y).view(b, s, self.kv_heads, d).transpose(1, 2)
        q, k = rotate(q, cos, sin), rotate(k, cos, sin)
        group = self.heads // self.kv_heads
        k = k.repeat_interleave(group, dim=1)
        v = v.repeat_interleave(group, dim=1)
        scores = q @ k.transpose(-2, -1) * (1.0 / math.sqrt(d)) + mask
        att = torch.softmax(scores, dim=-1) @ v
        x = x + self.o(att.transpose(1, 2).reshape(b, s, h))
        y = self.n2(x)
        return x + self.down(F.silu(self.gate(y)) * self.up(y))


class TinyLlama(nn.Module):
    def __init__(self, layers, hidden, heads, kv_heads, ffn, vocab, seq,
                 eps=1e-6):
        super().__init__()
        self.emb = nn.Embedding(vocab, hidden)
        self.blocks = nn.ModuleList(
            LlamaBlock(hidden, heads, kv_heads, ffn, eps)
            for _ in range(layers))
        self.norm = RMSNorm(hidden, eps)
        self.head = nn.Linear(hidden, vocab, bias=False)
        d = hidden // heads
        inv = 1.0 / (10000 ** (torch.arange(0, d, 2).float() / d))
        angles = torch.outer(torch.arange(seq).float(), inv)
        angles = torch.cat((angles, angles), dim=-1)
        self.register_buffer("cos", angles.cos())
        self.register_buffer("sin", angles.sin())
        self.register_buffer(
            "mask", torch.full((seq, seq), float("-inf")).triu(1))

    def forward(self, input_ids):
        s = input_ids.shape[1]
        x = self.emb(input_ids)
        for block in self.blocks:
            x = block(x, self.cos[:s], self.sin[:s], self.mask[:s, :s])
        return self.head(self.norm(x))


# The shared models (../shared/models/torch_export) and the torch modules of
# their shapes, read from their programs: 2 layers, hidden 64, 4 heads of
# 16 (Llama: 2 K/V heads), GPT-2's MLP of 256 with tanh GELU (timed with
# the erf GELU of Block: the same work), Llama's SwiGLU of 172, vocabulary
# 1000. torch trains modules of these shapes from their own seeded weights,
# so the two runs' losses differ; the times compare the same work.
SHARED_MODELS = {
    "gpt2_tiny": lambda seq: TinyGPT(argparse.Namespace(
        vocab=1000, hidden=64, seq=seq, heads=4, ffn=256, layers=2)),
    "llama_tiny": lambda seq: TinyLlama(2, 64, 4, 2, 172, 1000, seq),
}


def next_token_loss(logits, ids):
    return F.cross_entropy(logits[:, :-1].reshape(-1, logits.shape[-1]),
                           ids[:, 1:].reshape(-1))


def median_after_warmup(times, warmup):
    return statistics.median(times[warmup:])


def openblas():
    """The OpenBLAS that torch's GEMMs call (one copy in the process)."""
    try:
        lib = ctypes.CDLL("libopenblas.so.0")
        lib.openblas_get_corename.restype = ctypes.c_char_p
        return lib
    except (OSError, AttributeError):
        return None


def openblas_core():
    """The kernel family OpenBLAS chose (OPENBLAS_CORETYPE overrides it)."""
    lib = openblas()
    return lib.openblas_get_corename().decode() if lib else "unknown"


def reset_peak_rss():
    """Starts this process's peak resident memory (VmHWM) again from what it
    holds now (Linux: 5 into /proc/self/clear_refs)."""
    try:
        with open("/proc/self/clear_refs", "w") as f:
            f.write("5")
    except OSError:
        pass


def vm_hwm_kib(pid):
    """The peak resident memory (VmHWM, KiB) of a running process; 0 once
    it has exited."""
    try:
        with open("/proc/%d/status" % pid) as f:
            for line in f:
                if line.startswith("VmHWM:"):
                    return int(line.split()[1])
    except OSError:
        pass
    return 0


def peak_rss_mib():
    with open("/proc/self/status") as f:
        for line in f:
            if line.startswith("VmHWM:"):
                return int(line.split()[1]) / 1024
    return float("nan")


def time_torch(model_state, a, ids, threads, make_model=None):
    # torch.set_num_threads leaves OpenBLAS's own pool (one thread a core) as
    # it is; autopar-run --threads sets exactly that pool: set both.
    torch.set_num_threads(threads)
    lib = openblas()
    if lib:
        lib.openblas_set_num_threads(threads)
    if make_model:
        model = make_model()
    else:
        model = TinyGPT(a)
        model.load_state_dict(model_state)
    model.train()
    opt = torch.optim.AdamW(model.parameters(), lr=a.lr, betas=(0.9, 0.999),
                            eps=1e-8, weight_decay=0.0)
    times, cpu, losses = [], [], []
    reset_peak_rss()
    for _ in range(a.steps):
        start, start_cpu = time.perf_counter(), time.process_time()
        opt.zero_grad(set_to_none=True)
        loss = next_token_loss(model(ids), ids)
        loss.backward()
        opt.step()
        value = loss.item()
        times.append((time.perf_counter() - start) * 1e3)
        cpu.append((time.process_time() - start_cpu) * 1e3)
        losses.append(value)
    return times, cpu, losses, peak_rss_mib()


STEP_LINE = re.compile(r"^step (\d+) loss (\S+) time_ms (\S+) tokens_per_s")


def time_autopar(run_tool, program, tokens, a, threads, steps):
    """Per-step wall ms and losses of `autopar-run`, its CPU seconds and its
    peak resident memory (MiB)."""
    cmd = [run_tool, program, "--steps", str(steps), "--data", tokens,
           "--lr", str(a.lr), "--weight-decay", "0", "--threads",
           str(threads)]
    # Output to files and the child reaped with wait4: its own CPU time, not
    # every child's. Its peak resident memory is its VmHWM, read while it
    # runs (it only grows): wait4's ru_maxrss would be this Python process's
    # when it is larger, because Linux carries the memory of the process
    # that execs (here a vfork of this one) into the child's maximum.
    peak_kib = 0
    with tempfile.TemporaryFile("w+") as out, \
            tempfile.TemporaryFile("w+") as err:
        proc = subprocess.Popen(cmd, stdout=out, stderr=err, text=True)
        while True:
            peak_kib = max(peak_kib, vm_hwm_kib(proc.pid))
            pid, status, usage = os.wait4(proc.pid, os.WNOHANG)
            if pid:
                break
            time.sleep(0.01)
        proc.returncode = os.waitstatus_to_exitcode(status)
        out.seek(0)
        err.seek(0)
        stdout, stderr = out.read(), err.read()
    if proc.returncode != 0:
        sys.exit("train-vs-torch: autopar-run failed:\n%s" % (stdout + stderr))
    times, losses = [], []
    for line in stdout.splitlines():
        m = STEP_LINE.match(line)
        if m:
            losses.append(float(m.group(2)))
            times.append(float(m.group(3)))
    if len(times) != steps:
        sys.exit("train-vs-torch: autopar-run logged %d steps, expected %d:\n%s"
                 % (len(times), steps, stdout + stderr))
    return (times, losses, usage.ru_utime + usage.ru_stime, peak_kib / 1024)


def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--build", default=os.environ.get("AUTOPAR_BUILD", "build"))
    p.add_argument("--layers", type=int, default=4)
    p.add_argument("--hidden", type=int, default=256)
    p.add_argument("--heads", type=int, default=4)
    p.add_argument("--ffn", type=int, default=1024)
    p.add_argument("--vocab", type=int, default=1000)
    p.add_argument("--seq", type=int, default=128)
    p.add_argument("--batch", type=int, default=8)
    p.add_argument("--steps", type=int, default=12,
                   help="steps per run, warm-up included")
    p.add_argument("--warmup", type=int, default=2)
    p.add_argument("--rounds", type=int, default=1,
                   help="alternating runs of each per thread count; the "
                   "best median counts")
    p.add_argument("--lr", type=float, default=1e-3)
    p.add_argument("--threads", default="1,2",
                   help="comma-separated thread counts")
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--shared", metavar="DIR",
                   default=os.path.join(os.path.dirname(__file__), "..", "..",
                                        "shared", "models", "torch_export"),
                   help="the shared gpt2_tiny and llama_tiny exports "
                        "(skipped when absent)")
    p.add_argument("--shared-batch", type=int, default=8)
    p.add_argument("--shared-seq", type=int, default=64)
    p.add_argument("--keep", metavar="DIR",
                   help="write model.onnx, train.air, tokens.i32 here")
    a = p.parse_args()
    if a.steps <= max(a.warmup, 1) or a.rounds < 1:
        p.error("--steps must exceed --warmup and 1; --rounds must be 1 or "
                "more")
    opt_tool = os.path.join(a.build, "bin", "autopar-opt")
    run_tool = os.path.join(a.build, "bin", "autopar-run")
    for tool in (opt_tool, run_tool):
        if not os.access(tool, os.X_OK):
            sys.exit("train-vs-torch: %s is missing; build autopar first "
                     "(scripts/demo.sh) or set AUTOPAR_BUILD" % tool)
    threads = [int(t) for t in a.threads.split(",") if t]

    torch.manual_seed(a.seed)
    model = TinyGPT(a).eval()
    state = {k: v.clone() for k, v in model.state_dict().items()}
    gen = torch.Generator().manual_seed(a.seed + 1)
    ids = torch.randint(0, a.vocab, (a.batch, a.seq), generator=gen)

    tmp = None
    if a.keep:
        os.makedirs(a.keep, exist_ok=True)
        work = a.keep
    else:
        tmp = tempfile.TemporaryDirectory(prefix="train-vs-torch.")
        work = tmp.name
    onnx_path = os.path.join(work, "model.onnx")
    air_path = os.path.join(work, "train.air")
    tokens_path = os.path.join(work, "tokens.i32")

    with torch.no_grad(), warnings.catch_warnings():
        warnings.simplefilter("ignore", torch.jit.TracerWarning)
        torch.onnx.export(model, (ids,), onnx_path, opset_version=17,
                          input_names=["input_ids"], output_names=["logits"],
                          do_constant_folding=True)
    # The batch is the whole data file, so every step trains on it.
    ids.to(torch.int32).numpy().astype("<i4").tofile(tokens_path)
    start = time.perf_counter()
    subprocess.run([opt_tool, onnx_path, "--load-weights",
                    "--passes=import-canonical,autodiff,insert-optimizer",
                    "-o", air_path], check=True)
    compile_s = time.perf_counter() - start

    params = sum(v.numel() for v in model.parameters())
    tokens = a.batch * a.seq
    print("tiny GPT: %d layers, hidden %d, %d heads, ffn %d, vocab %d, "
          "seq %d, batch %d (%.2fM parameters)"
          % (a.layers, a.hidden, a.heads, a.ffn, a.vocab, a.seq, a.batch,
             params / 1e6))
    print("torch %s, OpenBLAS core %s (both), OMP_WAIT_POLICY %s, "
          "autopar-opt %.1f s"
          % (torch.__version__, openblas_core(),
             os.environ.get("OMP_WAIT_POLICY", "unset"), compile_s))
    print("ms: wall time per step, median of steps %d..%d of %d, best of %d "
          "round(s)\ncpu: CPU ms per step, all threads, mean of steps 2..%d "
          "(less inflated by a loaded machine)\nAdamW lr %g, weight decay 0"
          % (a.warmup + 1, a.steps, a.steps, a.rounds, a.steps, a.lr))
    times = ["%7s %10s %9s %6s %13s %11s %11s %9s %9s"
             % ("threads", "autopar ms", "torch ms", "ratio", "autopar tok/s",
                "torch tok/s", "autopar cpu", "torch cpu", "cpu ratio")]
    losses = ["%7s %14s %14s %8s %14s %14s %8s"
              % ("threads", "autopar step 1", "torch step 1", "rel",
                 "autopar last", "torch last", "rel")]
    memory = ["%7s %14s %12s %6s" % ("threads", "autopar MiB", "torch MiB",
                                       "ratio")]
    worst = 0.0
    for t in threads:
        # Alternate the two, best of the rounds: on a shared machine a load
        # spike then hits one round, not one side.
        ap_ms = th_ms = ap_cpu = th_cpu = ap_peak = th_peak = math.inf
        for _ in range(a.rounds):
            _, _, one_cpu, _ = time_autopar(run_tool, air_path, tokens_path,
                                            a, t, 1)
            ap_times, ap_losses, run_cpu, ap_rss = time_autopar(
                run_tool, air_path, tokens_path, a, t, a.steps)
            th_times, th_cpus, th_losses, th_rss = time_torch(state, a, ids,
                                                              t)
            ap_peak = min(ap_peak, ap_rss)
            th_peak = min(th_peak, th_rss)
            ap_ms = min(ap_ms, median_after_warmup(ap_times, a.warmup))
            th_ms = min(th_ms, median_after_warmup(th_times, a.warmup))
            ap_cpu = min(ap_cpu, (run_cpu - one_cpu) * 1e3 / (a.steps - 1))
            th_cpu = min(th_cpu, statistics.mean(th_cpus[1:]))
        rel = abs(ap_losses[0] - th_losses[0]) / abs(th_losses[0])
        last_rel = abs(ap_losses[-1] - th_losses[-1]) / abs(th_losses[-1])
        worst = max(worst, rel)
        times.append("%7d %10.1f %9.1f %6.2f %13.0f %11.0f %11.1f %9.1f %9.2f"
                     % (t, ap_ms, th_ms, ap_ms / th_ms, tokens / ap_ms * 1e3,
                        tokens / th_ms * 1e3, ap_cpu, th_cpu, ap_cpu / th_cpu))
        losses.append("%7d %14.7f %14.7f %8.1e %14.7f %14.7f %8.1e"
                      % (t, ap_losses[0], th_losses[0], rel, ap_losses[-1],
                         th_losses[-1], last_rel))
        memory.append("%7d %14.1f %12.1f %6.2f"
                      % (t, ap_peak, th_peak, ap_peak / th_peak))
    print("\n".join(times))
    print("losses (the same weights and batch; last: step %d)" % a.steps)
    print("\n".join(losses))
    print("peak resident memory while training (autopar-run's process; "
          "torch's from the start of its steps, the interpreter and torch "
          "included)")
    print("\n".join(memory))
    if worst > 1e-4:
        print("WARNING: first-step losses differ by %.1e relative: the two "
              "programs do not compute the same model" % worst)
    shared_models(a, opt_tool, run_tool, threads, work)
    if tmp:
        tmp.cleanup()


def shared_models(a, opt_tool, run_tool, threads, work):
    """The shared exports in autopar-run against torch modules of their
    shapes, at --shared-batch x --shared-seq."""
    if not os.path.isdir(a.shared):
        print("shared models: %s is absent; skipped" % a.shared)
        return
    b, s = a.shared_batch, a.shared_seq
    gen = torch.Generator().manual_seed(a.seed + 2)
    ids = torch.randint(0, 1000, (b, s), generator=gen)
    tokens_path = os.path.join(work, "shared-tokens.i32")
    ids.to(torch.int32).numpy().astype("<i4").tofile(tokens_path)
    print("shared models, batch %d x sequence %d (torch: modules of the same "
          "shapes, their own weights)" % (b, s))
    print("%-11s %7s %10s %9s %6s" % ("model", "threads", "autopar ms",
                                      "torch ms", "ratio"))
    for name, make in SHARED_MODELS.items():
        onnx_path = os.path.join(a.shared, name + "_opset17.onnx")
        air_path = os.path.join(work, name + ".air")
        subprocess.run([opt_tool, onnx_path, "--load-weights",
                        "--dim", "batch=%d" % b, "--dim", "sequence=%d" % s,
                        "--passes=import-canonical,autodiff,insert-optimizer",
                        "-o", air_path], check=True)
        for t in threads:
            ap_ms = th_ms = math.inf
            for _ in range(a.rounds):
                ap_times, _, _, _ = time_autopar(run_tool, air_path,
                                                 tokens_path, a, t, a.steps)
                th_times, _, _, _ = time_torch(None, a, ids, t,
                                               lambda: make(s))
                ap_ms = min(ap_ms, median_after_warmup(ap_times, a.warmup))
                th_ms = min(th_ms, median_after_warmup(th_times, a.warmup))
            print("%-11s %7d %10.1f %9.1f %6.2f"
                  % (name, t, ap_ms, th_ms, ap_ms / th_ms))


if __name__ == "__main__":
    main()
