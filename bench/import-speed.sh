#!/usr/bin/env bash
# Times the ONNX import and the import-canonical pipeline on generated models
# of growing size (tools/autopar-modelgen presets), best of 3 runs, and prints
# a table: preset, parameters, nodes, file size, seconds, peak memory.
# Needs a build (scripts/test.sh --no-sanitize or scripts/demo.sh),
# python3-onnx and GNU time (Debian's `time` package). Usage: bench/import-speed.sh [PRESET...]
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."
tool=build/bin/autopar-opt
[[ -x "$tool" ]] || { echo "bench: build autopar-opt first" >&2; exit 1; }
presets=("$@")
((${#presets[@]})) || presets=(gpt2-small llama-7b llama-70b mixtral-8x7b gpt-1t)
dir=$(mktemp -d)
trap 'rm -rf "$dir"' EXIT

printf '%-14s %18s %7s %9s %9s %9s\n' preset parameters nodes "file KB" seconds "peak MB"
for preset in "${presets[@]}"; do
  model="$dir/$preset.onnx"
  params=$(tools/autopar-modelgen --preset "$preset" -o "$model" 2>&1 |
    sed -n 's/.* \([0-9]\{1,\}\) parameters.*/\1/p')
  best=""
  peak=""
  for _ in 1 2 3; do
    # GNU time's %e (seconds) and %M (peak resident KB).
    /usr/bin/time -f '%e %M' -o "$dir/time" "$tool" "$model" --dim batch=1 \
      --dim sequence=2048 --passes=import-canonical -o "$dir/out.air" \
      2>/dev/null
    read -r seconds kb <"$dir/time"
    if [[ -z "$best" ]] || awk "BEGIN{exit !($seconds < $best)}"; then
      best=$seconds
      peak=$((kb / 1024))
    fi
  done
  nodes=$(grep -c ' = ' "$dir/out.air" || true)
  size=$(($(stat -c %s "$model") / 1024))
  printf '%-14s %18s %7s %9s %9s %9s\n' "$preset" "$params" "$nodes" "$size" "$best" "$peak"
done
