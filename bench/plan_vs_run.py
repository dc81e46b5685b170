"""Predicted against measured: plans of the `cpu` device, trained.

For a grid of plans (generated GPTs and, with ../shared, the shared torch
export gpt2_tiny; tensor, pipeline and data parallelism, ZeRO 0-3,
recomputation none/selective/full, offload none/optimizer-cpu/cpu/nvme) on
1, 2, 4 and 8 CPU ranks, plans with `autopar --gpu cpu`, trains a few steps
with autopar-run (mpirun for more than one rank) and prints, per plan, the
predicted and measured step time and peak memory per rank (model states:
weights, gradients and optimizer; activations), then the worst ratios
against the bounds: memory within 10% for every plan, step time within 25%
where the ranks do not exceed the machine's cores. Oversubscribed runs
(more ranks than cores) share cores, so their step time is printed but not
compared. The measured step time is the median of the steps after the
first (which allocates); runs that the cores can hold are trained --repeat
times (3 by default) and the fastest median kept, since this machine's
multi-rank runs are bimodal from run to run (the same plan measured 188 and
270 ms in consecutive runs). The `cpu` device's figures are
bench/cpu-calibrate.sh's (cost/Devices.def).

  plan_vs_run.py BUILD_BIN [--shared DIR] [--steps N] [--repeat N] [--keep DIR]
"""
import json
import os
import re
import shutil
import statistics
import subprocess
import sys
import tempfile

SRC = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))

GPT = ["--model", "gpt2", "--layers", "4", "--hidden", "128", "--heads", "4",
       "--ffn", "512", "--vocab", "512", "--max-pos", "128", "--seq", "128"]

# (name, model, ranks, global batch, --fix, extra autopar options)
GRID = [
    ("dp1", "gpt", 1, 8, "precision=fp32,mbs=8,recompute=none", []),
    ("selective", "gpt", 1, 8, "precision=fp32,mbs=8,recompute=selective", []),
    ("full", "gpt", 1, 8, "precision=fp32,mbs=8,recompute=full", []),
    ("optimizer-cpu", "gpt", 1, 8,
     "precision=fp32,mbs=8,zero=1,offload=optimizer-cpu", []),
    ("offload-cpu", "gpt", 1, 8, "precision=fp32,mbs=8,zero=3,offload=cpu",
     []),
    ("nvme", "gpt", 1, 8, "precision=fp32,mbs=8,zero=3,offload=nvme", []),
    ("dp2-zero0", "gpt", 2, 8, "precision=fp32,tp=1,pp=1,dp=2,mbs=4,zero=0",
     []),
    ("dp2-zero1", "gpt", 2, 8, "precision=fp32,tp=1,pp=1,dp=2,mbs=4,zero=1",
     []),
    ("dp2-zero2", "gpt", 2, 8, "precision=fp32,tp=1,pp=1,dp=2,mbs=4,zero=2",
     []),
    ("dp2-zero3", "gpt", 2, 8, "precision=fp32,tp=1,pp=1,dp=2,mbs=4,zero=3",
     []),
    ("tp2", "gpt", 2, 8, "precision=fp32,tp=2,pp=1,dp=1,mbs=8,sp=off", []),
    ("pp2", "gpt", 2, 8, "precision=fp32,tp=1,pp=2,dp=1,mbs=2,schedule=1f1b",
     []),
    ("tp2-pp2", "gpt", 4, 8,
     "precision=fp32,tp=2,pp=2,dp=1,mbs=2,sp=off,schedule=1f1b", []),
    ("tp2-pp2-dp2", "gpt", 8, 8,
     "precision=fp32,tp=2,pp=2,dp=2,mbs=2,sp=off,schedule=1f1b", []),
    ("tiny-dp1", "gpt2_tiny", 1, 2, "mbs=2",
     ["--dim", "batch=2", "--dim", "sequence=16"]),
    ("tiny-dp2", "gpt2_tiny", 2, 4, "tp=1,pp=1,dp=2,mbs=2,zero=1",
     ["--dim", "batch=2", "--dim", "sequence=16"]),
]

MEASURED = re.compile(
    r"memory rank (\d+) \(stage (\d+)\): measured peak [0-9.]+ MiB "
    r"\(parameters and optimizer state ([0-9.]+), gradients ([0-9.]+), "
    r"activations ([0-9.]+)\)")
PREDICTED = re.compile(
    r"plan predicts [0-9.]+ MiB \(weights ([0-9.]+), gradients ([0-9.]+), "
    r"optimizer ([0-9.]+), activations ([0-9.]+)\)")
STEP = re.compile(r"^step (\d+) loss \S+ time_ms ([0-9.]+)", re.M)


def run(cmd, **kw):
    return subprocess.run(cmd, check=True, capture_output=True, text=True,
                          **kw).stdout


def main(argv):
    args = argv[1:]
    if not args or args[0].startswith("-"):
        sys.exit(__doc__)
    bin_dir = os.path.abspath(args.pop(0))
    shared = os.path.join(os.path.dirname(SRC), "shared")
    steps, keep, repeat = 4, None, 3
    while args:
        opt = args.pop(0)
        if opt == "--shared":
            shared = args.pop(0)
        elif opt == "--steps":
            steps = int(args.pop(0))
        elif opt == "--keep":
            keep = args.pop(0)
        elif opt == "--repeat":
            repeat = max(1, int(args.pop(0)))
        else:
            sys.exit("unknown option " + opt + "\n" + __doc__)
    work = keep or tempfile.mkdtemp(prefix="plan-vs-run.")
    os.makedirs(work, exist_ok=True)
    env = dict(os.environ, OMPI_ALLOW_RUN_AS_ROOT="1",
               OMPI_ALLOW_RUN_AS_ROOT_CONFIRM="1", AUTOPAR_COMM_TIMEOUT="300")
    cores = os.cpu_count() or 1
    tokens = os.path.join(work, "tokens.bin")
    with open(tokens, "wb") as f:
        import array
        a = array.array("i", [(i * 7 + i // 23) % 97 for i in range(1 << 16)])
        if sys.byteorder != "little":
            a.byteswap()
        f.write(a.tobytes())
    models = {"gpt": os.path.join(work, "gpt.onnx")}
    run([os.path.join(SRC, "tools", "autopar-modelgen")] + GPT +
        ["-o", models["gpt"]])
    tiny = os.path.join(shared, "models", "torch_export",
                        "gpt2_tiny_opset17.onnx")
    if os.path.exists(tiny):
        models["gpt2_tiny"] = tiny

    rows = []
    for name, model, ranks, batch, fix, extra in GRID:
        if model not in models:
            print("%-14s skipped: %s is not there" % (name, tiny))
            continue
        out = os.path.join(work, name)
        shutil.rmtree(out, ignore_errors=True)
        try:
            run([os.path.join(bin_dir, "autopar"), models[model], "--gpu",
                 "cpu", "--gpus", str(ranks), "--global-batch", str(batch),
                 "--fix", fix, "-o", out] + extra)
        except subprocess.CalledProcessError as e:
            print("%-14s plan failed: %s" % (name, e.stderr.strip()[-300:]))
            continue
        plan = json.load(open(os.path.join(out, "plan.json")))
        train = [os.path.join(bin_dir, "autopar-run"), out, "--steps",
                 str(steps), "--lr", "0.01", "--data", tokens,
                 "--memory-report", "--offload-dir",
                 os.path.join(work, name + ".offload")]
        if model == "gpt":
            train.append("--random-init")
        if ranks > 1:
            train = ["mpirun", "--oversubscribe", "-np", str(ranks)] + train
        measured_ms, text = float("nan"), None
        try:
            for _ in range(repeat if ranks <= cores else 1):
                out_text = run(train, env=env, cwd=work)
                text = text or out_text
                times = [float(t) for s, t in STEP.findall(out_text)
                         if int(s) > 1]
                if times:
                    m = statistics.median(times)
                    if not measured_ms <= m:
                        measured_ms = m
        except subprocess.CalledProcessError as e:
            print("%-14s run failed: %s" % (name, e.stderr.strip()[-300:]))
            continue
        predicted_ms = plan["plan"]["step_time_s"] * 1e3
        # The rank whose memory is furthest from its prediction.
        row_mem, worst = None, -1.0
        for line in text.splitlines():
            m, p = MEASURED.search(line), PREDICTED.search(line)
            if not m or not p:
                continue
            ms = float(m.group(3)) + float(m.group(4))
            ps = float(p.group(1)) + float(p.group(2)) + float(p.group(3))
            ma, pa = float(m.group(5)), float(p.group(4))
            off = max(abs(ms / ps - 1) if ps else 0,
                      abs(ma / pa - 1) if pa else 0)
            if off > worst:
                row_mem, worst = (ps, ms, pa, ma), off
        if row_mem is None:
            print("%-14s no memory report in its output" % name)
            continue
        rows.append((name, ranks, predicted_ms, measured_ms, ranks > cores) +
                    row_mem)

    print()
    print("%-14s %5s %10s %10s %6s %9s %9s %6s %9s %9s %6s" %
          ("plan", "ranks", "pred ms", "meas ms", "ratio", "states p",
           "states m", "ratio", "acts p", "acts m", "ratio"))
    worst_time = worst_mem = (1.0, "")
    for (name, ranks, pt, mt, over, ps, ms, pa, ma) in rows:
        tr, sr = mt / pt, ms / ps
        ar = ma / pa if pa else float("nan")
        print("%-14s %5d %10.1f %10.1f %6s %9.3f %9.3f %6.2f %9.3f %9.3f %6.2f"
              % (name, ranks, pt, mt,
                 "over" if over else "%.2f" % tr, ps, ms, sr, pa, ma, ar))
        if not over and abs(tr - 1) > abs(worst_time[0] - 1):
            worst_time = (tr, name)
        for r in (sr, ar):
            if r == r and abs(r - 1) > abs(worst_mem[0] - 1):
                worst_mem = (r, name)
    print()
    print("states: weights + gradients + optimizer state (MiB, the rank "
          "furthest from its prediction); acts: activations (MiB)")
    print("'over': more ranks than the %d cores, step time not compared" %
          cores)
    print("worst memory ratio: %.2f (%s): %s" %
          (worst_mem[0], worst_mem[1],
           "within 10%" if abs(worst_mem[0] - 1) <= 0.10 else
           "NOT within 10%"))
    print("worst step-time ratio: %.2f (%s): %s" %
          (worst_time[0], worst_time[1],
           "within 25%" if abs(worst_time[0] - 1) <= 0.25 else
           "NOT within 25%"))
    if not keep:
        shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    main(sys.argv)
