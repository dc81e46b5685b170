#!/usr/bin/env bash
# Training step time of autopar-run against PyTorch on the CPU: the same
# seeded tiny GPT (4 layers, hidden 256, 4 heads, ffn 1024, vocab 1000,
# sequence 128, batch 8 by default) exported to ONNX and compiled with
# autopar-opt, and the same fixed batch, AdamW and next-token loss in both;
# prints ms/step, the ratio autopar/torch, tokens/s and the first-step
# losses for 1 and 2 threads. Needs a build (scripts/demo.sh; AUTOPAR_BUILD
# names another build folder) and Debian's python3-torch for /usr/bin/python3
# (a pyenv python3 on PATH lacks it).
# Usage: bench/train-vs-torch.sh [--install] [bench/train_vs_torch.py options]
#   --install   apt-get install python3-torch when it is missing
#   --help      the options of bench/train_vs_torch.py (model size, steps,
#               --threads 1,2, --rounds, --keep DIR)
# OPENBLAS_CORETYPE (e.g. SkylakeX) applies to both. OpenBLAS 0.3.21 does
# not know recent Xeons and falls back to its SSE3 (Prescott) kernels;
# autopar-run then restarts itself with the AVX-512 (or AVX2) kernels
# (runtime/cpu/BlasCore.h), so when it is unset this script sets it the same
# way for torch, whose GEMMs run in this process's OpenBLAS; and both get
# autopar-run's OPENBLAS_THREAD_TIMEOUT (2^20 cycles of spinning after a
# GEMM instead of 2^28) unless it is set.
# OMP_WAIT_POLICY defaults to PASSIVE here: torch's spinning OpenMP threads
# otherwise fight OpenBLAS's own threads for the cores (10x slower steps at
# 2 threads on a busy 2-core machine).
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."
python=/usr/bin/python3

install=0
args=()
for arg in "$@"; do
  case "$arg" in
    --install) install=1 ;;
    *) args+=("$arg") ;;
  esac
done

if ! "$python" -c 'import torch' 2>/dev/null; then
  if ((install == 0)); then
    echo "train-vs-torch: $python cannot import torch; install Debian's" \
      "python3-torch (apt-get install -y python3-torch), or rerun with" \
      "--install" >&2
    exit 1
  fi
  sudo=()
  if ((EUID != 0)); then
    if command -v sudo >/dev/null 2>&1; then
      sudo=(sudo)
    else
      echo "train-vs-torch: error: need root (or sudo) to install" \
        "python3-torch" >&2
      exit 1
    fi
  fi
  echo "train-vs-torch: installing python3-torch"
  "${sudo[@]}" env DEBIAN_FRONTEND=noninteractive apt-get update
  "${sudo[@]}" env DEBIAN_FRONTEND=noninteractive \
    apt-get install -y --no-install-recommends python3-torch
fi

export OMP_WAIT_POLICY=${OMP_WAIT_POLICY:-PASSIVE}
if [[ -z ${OPENBLAS_CORETYPE:-} ]]; then
  flags=$(grep -m1 '^flags' /proc/cpuinfo || true)
  has() { [[ " $flags " == *" $1 "* ]]; }
  if has avx512f && has avx512bw && has avx512dq && has avx512vl; then
    export OPENBLAS_CORETYPE=SkylakeX
  elif has avx2 && has fma; then
    export OPENBLAS_CORETYPE=Haswell
  fi
fi
export OPENBLAS_THREAD_TIMEOUT=${OPENBLAS_THREAD_TIMEOUT:-20}
exec "$python" bench/train_vs_torch.py \
  --build "${AUTOPAR_BUILD:-build}" ${args[@]+"${args[@]}"}
