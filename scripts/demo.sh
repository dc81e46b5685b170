#!/usr/bin/env bash
# Sets up, builds autopar in build/ and runs it on the bundled examples:
# the IR and the ONNX importer on examples/, then the planner on generated
# GPT models (175B on 1024 A100s, a 1T model on 3072), and last the runtime
# training a small generated GPT on four CPU ranks (mpirun) for a few steps.
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."

bash scripts/install-deps.sh

# Same configuration as scripts/test.sh, so the two share build/.
cmake -G Ninja -S . -B build -DCMAKE_BUILD_TYPE=RelWithDebInfo \
  -DCMAKE_C_FLAGS_RELWITHDEBINFO="-O2 -g" \
  -DCMAKE_CXX_FLAGS_RELWITHDEBINFO="-O2 -g" >/dev/null
cmake --build build --target autopar-opt autopar autopar-run

run() {
  echo
  echo "\$ $*"
  "$@"
}

run build/bin/autopar-opt examples/mlp.air --passes=canonicalize
# The ONNX frontend: a model with a symbolic batch, bound on the command line.
run build/bin/autopar-opt examples/mlp.pbtxt --dim batch=8 --passes=canonicalize
# A real PyTorch export, when the shared models are beside the checkout.
llama=../shared/models/torch_export/llama_tiny_opset17.onnx
if [[ -f "$llama" ]]; then
  echo
  echo "\$ build/bin/autopar-opt $llama --dim batch=2 --dim sequence=16 --passes=import-canonical | grep -v param | head -30"
  mkdir -p build/demo
  build/bin/autopar-opt "$llama" --dim batch=2 --dim sequence=16 \
    --passes=import-canonical -o build/demo/llama_tiny.air
  grep -v -m 30 '^  param' build/demo/llama_tiny.air
fi

# A 1T-parameter GPT, generated (its weights are declared, never written),
# imported, canonicalized and cut into layers; the last lines are the
# per-layer statistics (forward FLOPs for batch 1, sequence 2048).
mkdir -p build/demo
run tools/autopar-modelgen --preset gpt-1t -o build/demo/gpt-1t.onnx
echo
echo "\$ build/bin/autopar-opt build/demo/gpt-1t.onnx --dim batch=1 --dim sequence=2048 --passes=import-canonical,test-print-layer-stats -o build/demo/gpt-1t.air 2>/dev/null | tail -4"
build/bin/autopar-opt build/demo/gpt-1t.onnx --dim batch=1 --dim sequence=2048 \
  --passes=import-canonical,test-print-layer-stats -o build/demo/gpt-1t.air \
  2>/dev/null | tail -4

# The planner: GPT-3 175B on 1024 A100-80GB, batch 1536; the plan files go
# to build/demo/gpt-175b-plan/.
run tools/autopar-modelgen --model gpt2 --layers 96 --hidden 12288 --heads 96 \
  --ffn 49152 --vocab 51200 --max-pos 2048 --seq 2048 \
  -o build/demo/gpt-175b.onnx
run build/bin/autopar build/demo/gpt-175b.onnx --gpus 1024 \
  --global-batch 1536 --top 3 -o build/demo/gpt-175b-plan
# The 1T model with Megatron-LM's published configuration pinned.
run build/bin/autopar build/demo/gpt-1t.onnx --dim sequence=2048 --gpus 3072 \
  --global-batch 3072 --fix tp=8,pp=64,recompute=full,sp=off

# Training on the CPU runtime: a 2-layer GPT planned for four CPU ranks
# (tensor parallel over 2, as the solver splits it for the `cpu` device,
# times data parallel over 2 with ZeRO-1, 2 micro-batches each); `autopar
# -o` writes the plan and the rank program (stage0.air: each rank's shards
# of the split layers, forward, backward with the tensor-parallel
# collectives, gradient reduce-scatter, AdamW on each rank's shard,
# parameter all-gather), and mpirun starts four autopar-run processes that
# train it on a fixed token stream, the weights initialised by the runtime
# (the generated weights file is never written), so the loss falls; then
# the measured memory per rank next to the plan's prediction.
run tools/autopar-modelgen --model gpt2 --layers 2 --hidden 64 --heads 4 \
  --ffn 256 --vocab 100 --max-pos 32 --seq 16 -o build/demo/gpt-tiny.onnx
rm -rf build/demo/gpt-tiny-plan
run build/bin/autopar build/demo/gpt-tiny.onnx --gpu cpu --gpus 4 \
  --gpus-per-node 2 --global-batch 8 --fix tp=2,dp=2,zero=1,mbs=2,offload=none \
  -o build/demo/gpt-tiny-plan
python3 -c "import struct; open('build/demo/tokens.i32', 'wb').write(struct.pack('<256i', *[(7 * i) % 100 for i in range(256)]))"
if [[ $(id -u) == 0 ]]; then
  export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
fi
run mpirun --oversubscribe -np 4 build/bin/autopar-run build/demo/gpt-tiny-plan \
  --steps 8 --data build/demo/tokens.i32 --lr 0.01 --weight-decay 0 \
  --random-init --memory-report
