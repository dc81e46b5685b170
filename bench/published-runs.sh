#!/usr/bin/env bash
# Compares autopar's predictions with published training runs: Narayanan et
# al. 2021's Tables 1 and 2 (the runs the A100's sustained fraction is
# fitted to), and, held out, 23 configurations of 2022-2025 (Korthikanti
# et al., BLOOM, MegaScale, Llama 3, Nemotron-4, FSDP, ...). See
# bench/published_runs.py for what is pinned and why, and
# bench/published-runs-sources.md for the sources.
# Needs a build and python3-onnx.
# Usage: bench/published-runs.sh [--fit]
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."
exec python3 bench/published_runs.py "$@"
