#!/usr/bin/env bash
# Compares autopar's predictions with published training runs: Narayanan et
# al. 2021's Tables 1 and 2 (the runs the A100's sustained fraction is
# fitted to), and, held out, Korthikanti et al. 2022 and Megatron-LM's 2024
# H100 figures. See bench/published_runs.py for what is pinned and why.
# Needs a build and python3-onnx.
# Usage: bench/published-runs.sh [--fit]
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."
exec python3 bench/published_runs.py "$@"
