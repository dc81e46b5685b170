#!/usr/bin/env bash
# verify-plan-dir.sh DIR: the plan folder DIR is IR all the way down.
#  - autopar-opt prints DIR/plan.air back byte for byte;
#  - plan.json records the same pipelines as plan.air;
#  - each stage<S>.air is what `autopar-opt plan.air --passes=<pipeline S>`
#    prints, with the pipeline the plan records in `training_pipelines`.
# Prints one line per file checked; exits non-zero at the first mismatch.
set -euo pipefail
dir=$1
autopar-opt "$dir/plan.air" | cmp - "$dir/plan.air"
echo "plan.air round-trips"
count=$(python3 -c 'import json, sys; print(len(json.load(open(sys.argv[1])).get("training_pipelines", [])))' "$dir/plan.json")
for ((s = 0; s < count; s++)); do
  pipeline=$(python3 -c 'import json, sys; print(json.load(open(sys.argv[1]))["training_pipelines"][int(sys.argv[2])])' "$dir/plan.json" "$s")
  autopar-opt "$dir/plan.air" --passes="$pipeline" | cmp - "$dir/stage$s.air"
  echo "stage$s.air reproduced by: $pipeline"
done
