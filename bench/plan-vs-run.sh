#!/usr/bin/env bash
# Predicted against measured on this machine: a grid of `cpu`-device plans
# (tp, pp, dp, ZeRO 0-3, recomputation, offload; 1, 2, 4 and 8 ranks; the
# generated GPT and, with ../shared, gpt2_tiny) planned, trained a few
# steps, and the predicted and measured step time and peak memory printed
# per plan with the worst ratios (bench/plan_vs_run.py says how). Needs a
# build (scripts/demo.sh; AUTOPAR_BUILD names another build folder) and
# mpirun. The `cpu` device's figures come from bench/cpu-calibrate.sh.
# Usage: bench/plan-vs-run.sh [--steps N] [--repeat N] [--keep DIR] [--shared DIR]
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."
build=${AUTOPAR_BUILD:-build}
if [[ ! -x "$build/bin/autopar-run" ]]; then
  echo "plan-vs-run: no $build/bin/autopar-run; build first (scripts/demo.sh)" >&2
  exit 1
fi
exec python3 bench/plan_vs_run.py "$build/bin" "$@"
