#!/usr/bin/env bash
# Times `autopar` planning (import, canonical form, search) on the two
# reference cases of the planner issue, best of 3 runs, and prints the plan
# each finds: GPT-3 175B (96 layers, h 12288, 96 heads, sequence 2048, vocab
# 51200) on 1024 A100-80GB, target under 1 s; a 1T GPT (128 layers, h 25600,
# 160 heads) on 16384 H100, target under 10 s. Then models whose layers
# keep many values live at once, which is what makes the sharding solver
# work (llama-7b's rotary embedding, mixtral-8x7b's eight experts side by
# side), on 8 A100-80GB at sequence 2048. Needs a build
# (scripts/demo.sh), python3-onnx and GNU time. Usage: bench/plan-speed.sh
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."
tool=${AUTOPAR:-build/bin/autopar}
[[ -x "$tool" ]] || { echo "bench: build autopar first" >&2; exit 1; }
dir=$(mktemp -d)
trap 'rm -rf "$dir"' EXIT

tools/autopar-modelgen --model gpt2 --layers 96 --hidden 12288 --heads 96 \
  --ffn 49152 --vocab 51200 --max-pos 2048 --seq 2048 -o "$dir/gpt-175b.onnx" \
  2>/dev/null
tools/autopar-modelgen --preset gpt-1t --seq 2048 -o "$dir/gpt-1t.onnx" \
  2>/dev/null
for preset in llama-7b mixtral-8x7b; do
  tools/autopar-modelgen --preset "$preset" -o "$dir/$preset.onnx" 2>/dev/null
done

run() {
  local name=$1
  shift
  local best="" peak="" summary=""
  for _ in 1 2 3; do
    /usr/bin/time -f '%e %M' -o "$dir/time" "$tool" "$@" >"$dir/out" 2>/dev/null
    read -r seconds kb <"$dir/time"
    if [[ -z "$best" ]] || awk "BEGIN{exit !($seconds < $best)}"; then
      best=$seconds
      peak=$((kb / 1024))
      summary=$(cat "$dir/out")
    fi
  done
  printf '%-28s %8s s %8s MB\n' "$name" "$best" "$peak"
  sed 's/^/    /' <<<"$summary"
}

printf '%-28s %10s %11s\n' case wall "peak RSS"
for threads in 1 2; do
  run "175B on 1024 a100-80gb, $threads thr" "$dir/gpt-175b.onnx" --gpus 1024 \
    --global-batch 1536 --threads "$threads"
  run "1T on 16384 h100, $threads thr" "$dir/gpt-1t.onnx" --gpu h100 \
    --gpus 16384 --global-batch 8192 --threads "$threads"
done
for preset in llama-7b mixtral-8x7b; do
  for threads in 1 2; do
    run "$preset on 8 a100-80gb, $threads thr" "$dir/$preset.onnx" --gpus 8 \
      --dim sequence=2048 --global-batch 32 --threads "$threads"
  done
done
