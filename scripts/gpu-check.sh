#!/usr/bin/env bash
# The GPU check, for a bare GPU machine (CUDA toolkit, CMake, Python; no
# LLVM, onnx, protobuf, OpenMPI or BLAS from Debian), run from the
# repository root with $OUT naming a folder for the results:
#   1. the CUDA backend's unit tests (kernels against the CPU backend on
#      small programs; test/Unit/CudaBackendTest.cpp);
#   2. a tiny GPT-2 with dropout trained 5 steps on the CPU and on the GPU:
#      the losses must agree (fp32, 1e-5 first step, 1e-4 after; both
#      backends draw the same dropout masks); its plan pins
#      attention=flash (fp32 plans default to materialized scores), so the
#      GPU runs the flash kernels forward and backward;
#   3. the calibration benchmark (bench/gpu-calibrate.cu): GEMMs over a grid
#      and over the big GPT's shapes, memory bandwidth, the runtime's
#      kernels; it writes $OUT/calibration.json for `autopar --calibration`;
#   4. a training step of a GPT-2 that fills an H200 (24 layers, hidden 4096,
#      sequence 2048, bf16, materialized attention: flash is unpriced on
#      CUDA until its kernels use tensor cores),
#      timed, next to the plan's prediction with and without the
#      calibration;
# and prints a table last. Binaries come from carry/autopar-gpu.tar.xz
# (scripts/gpu-bundle.sh, built on a machine with LLVM); when it is missing
# or does not run, only the calibration benchmark is built here with nvcc,
# and the rest is reported as not run. Bounded to about 8 minutes.
set -uo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."
root=$(pwd)
OUT=${OUT:-$root/out/gpu-check}
mkdir -p "$OUT"
work=$(mktemp -d /tmp/autopar-gpu.XXXXXX)
# Logs go to $L; the few files worth keeping are copied to $OUT at the end
# (the device tool brings back at most 8).
L="$work/logs"
mkdir -p "$L"
started=$(date +%s)
log() { echo "== [$(($(date +%s) - started)) s] $*"; }
# The table's rows, filled as the steps run.
declare -A row
row[tests]="not run"
row[tiny]="not run"
row[flash]="not run"
row[gemm]="not run"
row[bandwidth]="not run"
row[mfu]="not run"
row[step]="not run"

log "device"
nvidia-smi -L 2>&1 | head -4 || true

# CUDA's libraries: the toolkit's, and NCCL from the Python wheels when the
# toolkit has none.
cuda_libs=""
for d in /usr/local/cuda/lib64 /usr/local/cuda/lib \
  $(python3 - <<'EOF' 2>/dev/null
import importlib, os
for name in ("nvidia.nccl", "nvidia.cublas", "nvidia.cuda_runtime"):
    try:
        m = importlib.import_module(name)
        for p in m.__path__:
            print(os.path.join(p, "lib"))
    except Exception:
        pass
EOF
  ); do
  [[ -d "$d" ]] && cuda_libs="$cuda_libs${cuda_libs:+:}$d"
done
export LD_LIBRARY_PATH="$cuda_libs${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"

# 1. The bundle, or the fallback.
mode=none
if [[ -f carry/autopar-gpu.tar.xz ]] &&
  tar -C "$work" -xJf carry/autopar-gpu.tar.xz 2>"$L/untar.log"; then
  export LD_LIBRARY_PATH="$work/lib:$LD_LIBRARY_PATH"
  "$work/bin/autopar-run" --help >/dev/null 2>"$L/bundle.log"
  a=$?
  # The benchmark prints its usage and exits 2.
  "$work/bin/autopar-gpu-calibrate" --help >/dev/null 2>>"$L/bundle.log"
  b=$?
  ((a == 0 && b == 2)) && mode=bundle
fi
if [[ $mode != bundle ]]; then
  if [[ -f carry/autopar-gpu.tar.xz ]]; then
    log "the bundle does not run here: $(head -c 300 "$L/bundle.log" 2>/dev/null)"
  else
    log "no bundle (carry/autopar-gpu.tar.xz: scripts/gpu-bundle.sh)"
  fi
  log "building the calibration benchmark with nvcc; the rest needs LLVM"
  mkdir -p "$work/bin"
  if timeout 240 nvcc -O2 -std=c++17 -arch=sm_90 -I. bench/gpu-calibrate.cu \
    runtime/cuda/ElementwiseKernels.cu runtime/cuda/RowKernels.cu \
    runtime/cuda/FlashAttentionKernels.cu -lcublas \
    -o "$work/bin/autopar-gpu-calibrate" >"$L/nvcc.log" 2>&1; then
    mode=source
  else
    tail -20 "$L/nvcc.log"
  fi
fi
log "binaries: $mode"
run=("$work/bin/autopar-run")
plans="$work/plans"

# 2. The unit tests.
if [[ $mode == bundle ]]; then
  log "unit tests (CudaBackendTest.*)"
  timeout 180 "$work/bin/AutoparUnitTests" --gtest_filter='CudaBackendTest.*' \
    --gtest_output="json:$L/gtest.json" >"$L/gtest.log" 2>&1
  rc=$?
  tail -15 "$L/gtest.log"
  row[tests]=$(python3 - "$L/gtest.json" "$rc" <<'EOF'
import json, sys
try:
    d = json.load(open(sys.argv[1]))
except Exception:
    print("crashed (exit %s)" % sys.argv[2]); sys.exit()
t = f = s = 0
for suite in d.get("testsuites", []):
    for case in suite.get("testsuite", []):
        t += 1
        if case.get("failures"):
            f += 1
        elif case.get("result") == "SKIPPED":
            s += 1
print("%d passed, %d failed, %d skipped of %d" % (t - f - s, f, s, t))
EOF
)
  # The flash kernels: their unit tests, and the attention of the plans.
  row[flash]=$(python3 - "$L/gtest.json" "$plans/tiny/plan/plan.json" \
    "$plans/big/plan/plan.json" <<'EOF'
import json, sys
try:
    cases = [c for suite in json.load(open(sys.argv[1])).get("testsuites", [])
             for c in suite.get("testsuite", [])
             if c.get("name", "").startswith("FlashAttention")
             or c.get("name") == "AttentionAndItsGradient"]
    passed = sum(1 for c in cases if not c.get("failures")
                 and c.get("result") != "SKIPPED")
    tests = "%d of %d tests passed" % (passed, len(cases))
except Exception:
    tests = "tests not run"
plans = []
for name, path in (("tiny", sys.argv[2]), ("big", sys.argv[3])):
    try:
        p = json.load(open(path))["plan"]
        plans.append("%s %s attention=%s" % (name, p["precision"], p["attention"]))
    except Exception:
        plans.append("%s: no plan" % name)
print(tests + "; plans: " + ", ".join(plans))
EOF
)

  # 3. The tiny GPT: CPU against GPU.
  log "tiny GPT-2: 5 steps on the CPU and on the GPU"
  tiny="$plans/tiny/plan/stage0.air"
  if timeout 120 "${run[@]}" "$tiny" --steps 5 --random-init --seed 7 \
    >"$L/tiny-cpu.txt" 2>&1 &&
    timeout 120 "${run[@]}" "$tiny" --steps 5 --random-init --seed 7 \
      --backend cuda >"$L/tiny-cuda.txt" 2>&1; then
    row[tiny]=$(python3 test/Runtime/Inputs/losses.py compare \
      "$L/tiny-cpu.txt" "$L/tiny-cuda.txt" --first 1e-5 --last 1e-4)
  else
    row[tiny]="failed: $(tail -1 "$L/tiny-cuda.txt" 2>/dev/null)"
  fi
  cat "$L/tiny-cuda.txt"
fi

# 4. Calibration.
if [[ $mode != none ]]; then
  log "calibration benchmark"
  shapes=()
  [[ -f "$plans/big/shapes.txt" ]] && shapes=(--shapes "$plans/big/shapes.txt")
  timeout 200 "$work/bin/autopar-gpu-calibrate" --device h200 \
    --calibration "$OUT/calibration.json" \
    --measurements "$OUT/measurements.json" "${shapes[@]}" \
    >"$L/calibrate.log" 2>&1
  cat "$L/calibrate.log"
  if [[ -f "$OUT/measurements.json" ]]; then
    read -r gemm bandwidth < <(python3 - "$OUT/measurements.json" <<'EOF'
import json, sys
m = json.load(open(sys.argv[1]))
best, peak = m["gemm_best_tflops"]["bf16"], m["catalog_peak_tflops"]["bf16"]
plan = m.get("plan_gemms", [])
if plan:
    # FLOP-weighted: the time the plan's GEMMs take at these rates.
    flops = sum(2 * g["m"] * g["n"] * g["k"] * g["batch"] for g in plan)
    secs = sum(2 * g["m"] * g["n"] * g["k"] * g["batch"] / (g["tflops"] * 1e12)
               for g in plan)
    rate = "plan shapes %.0f TFLOP/s (%.0f%% of the measured ceiling %.0f; peak %.0f)" % (
        flops / secs / 1e12, 100 * flops / secs / 1e12 / best, best, peak)
else:
    rate = "ceiling %.0f TFLOP/s (peak %.0f)" % (best, peak)
print(rate.replace(" ", "_"), "%.0f_GB/s_memcpy,_%.0f_GB/s_kernel" % (
    m["memcpy_gbs"], m["stream_kernel_gbs"]))
EOF
)
    row[gemm]=${gemm//_/ }
    row[bandwidth]=${bandwidth//_/ }
    # The flash kernels' times at one layer of the big GPT.
    flash=$(python3 - "$OUT/measurements.json" <<'EOF'
import json, sys
k = {o["op"]: o["ms"] for o in json.load(open(sys.argv[1])).get("kernels", [])}
if "flash-attention" in k:
    print("causal [1, 32, 2048, 128] bf16: forward %.1f ms, gradient %.1f ms"
          % (k["flash-attention"], k.get("flash-attention-grad", -1)))
EOF
)
    if [[ -n $flash && ${row[flash]} == "not run" ]]; then
      row[flash]=$flash
    elif [[ -n $flash ]]; then
      row[flash]="${row[flash]}; $flash"
    fi
  fi
fi

# 5. The big GPT's training step.
if [[ $mode == bundle ]]; then
  big="$plans/big/plan"
  cp "$plans/big/summary.txt" "$L/big-plan.txt" 2>/dev/null
  if [[ -f "$OUT/calibration.json" ]]; then
    log "the big GPT's plan with the calibration"
    timeout 60 "$work/bin/autopar" "$plans/big/model.onnx" --gpu h200 \
      --gpus 1 --global-batch 2 --fix mbs=2 \
      --calibration "$OUT/calibration.json" -o "$work/big-calibrated" \
      >"$L/big-plan-calibrated.txt" 2>&1
    cat "$L/big-plan-calibrated.txt"
  fi
  log "the big GPT: 4 training steps (5.05B parameters, bf16)"
  timeout 330 "${run[@]}" "$big/stage0.air" --steps 4 --random-init \
    --backend cuda >"$L/big-train.txt" 2>&1
  cat "$L/big-train.txt"
  read -r step mfu < <(python3 - "$L/big-train.txt" "$big/plan.json" \
    "$work/big-calibrated/plan.json" <<'EOF'
import json, re, sys
times = [float(m.group(1)) for m in
         (re.search(r"time_ms (\S+)", l) for l in open(sys.argv[1])) if m]
plan = json.load(open(sys.argv[2]))["plan"]
try:
    calibrated = json.load(open(sys.argv[3]))["plan"]["step_time_s"]
except Exception:
    calibrated = None
if len(times) < 2:
    print("no_timed_steps none"); sys.exit()
# The first step warms up (cuBLAS heuristics, the allocator's cache).
measured = sorted(times[1:])[len(times[1:]) // 2] / 1e3
flops = plan["model_tflops_per_gpu"] * 1e12 * plan["step_time_s"]
peak = 989e12  # cost/Devices.def, [H200] bf16 dense
step = "measured_%.3f_s,_predicted_%.3f_s" % (measured, plan["step_time_s"])
if calibrated:
    step += "_(calibrated_%.3f_s)" % calibrated
print(step, "%.1f%%_(plan_predicts_%.1f%%)" % (
    100 * flops / measured / peak, 100 * plan["mfu"]))
EOF
)
  row[step]=${step//_/ }
  row[mfu]=${mfu//_/ }
fi

log "done"
cp "$L/gtest.log" "$OUT/" 2>/dev/null
cat "$L/tiny-cpu.txt" "$L/tiny-cuda.txt" >"$OUT/tiny.txt" 2>/dev/null
cat "$L/big-plan.txt" "$L/big-plan-calibrated.txt" >"$OUT/big-plan.txt" \
  2>/dev/null
cp "$L/big-train.txt" "$OUT/" 2>/dev/null
summary=$(cat <<EOF
| check | result |
| --- | --- |
| binaries | $mode |
| CUDA unit tests | ${row[tests]} |
| tiny GPT-2, CPU vs GPU losses | ${row[tiny]} |
| flash attention | ${row[flash]} |
| bf16 GEMM | ${row[gemm]} |
| memory bandwidth | ${row[bandwidth]} |
| GPT-2 24x4096 bf16 step time | ${row[step]} |
| GPT-2 24x4096 bf16 MFU | ${row[mfu]} |
EOF
)
echo "$summary" | tee "$OUT/summary.md"
rm -rf "$work"
