#!/usr/bin/env bash
# Fills carry/ (git-ignored) with what scripts/gpu-check.sh runs on a bare GPU
# machine (CUDA toolkit, CMake and Python, but none of Debian's libraries):
# the CUDA build's binaries, the shared libraries they need that are neither
# the C library nor CUDA's (found with ldd; CUDA's come from the machine's
# toolkit, they are far too large to carry), and the programs of the check
# (a tiny GPT-2 in fp32 and a GPT-2 that fills an H200 in bf16, with their
# plans), all in carry/autopar-gpu.tar.xz.
#
# Usage: scripts/gpu-bundle.sh [--build-dir DIR]   (default build-gpu)
# The build folder is configured with -DAUTOPAR_CUDA=ON if it is new; the
# model generator needs Debian's python3 with python3-onnx.
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."
root=$(pwd)
build=build-gpu
while (($#)); do
  case "$1" in
    --build-dir) build=$2; shift 2 ;;
    -h | --help) sed -n '2,13s/^# \{0,1\}//p' "$0"; exit 0 ;;
    *) echo "gpu-bundle.sh: unknown argument '$1'" >&2; exit 2 ;;
  esac
done
die() { echo "gpu-bundle.sh: error: $*" >&2; exit 1; }

# The GPT that fills an H200: 24 layers, hidden 4096, sequence 2048, bf16
# (5.05B parameters); global batch 2 keeps the runtime's activations well
# inside 141 GB. Its plan pins materialized attention (the default: CUDA's
# flash kernels run on CUDA cores, unpriced), priced as it runs; the
# calibration benchmark times the flash kernels separately.
big=(--model gpt2 --layers 24 --hidden 4096 --heads 32 --ffn 16384
  --vocab 50304 --max-pos 2048 --seq 2048 --dtype bf16)
big_batch=2

if [[ ! -f "$build/CMakeCache.txt" ]]; then
  cmake -G Ninja -S "$root" -B "$build" -DCMAKE_BUILD_TYPE=RelWithDebInfo \
    -DCMAKE_CXX_FLAGS_RELWITHDEBINFO="-O2 -g" -DAUTOPAR_CUDA=ON ||
    die "configuring $build failed"
fi
grep -q '^AUTOPAR_CUDA:BOOL=ON' "$build/CMakeCache.txt" ||
  die "$build is not configured with AUTOPAR_CUDA=ON"
bins=(autopar autopar-run autopar-gpu-calibrate)
ninja -C "$build" -j1 "${bins[@]}" AutoparUnitTests || die "building failed"

stage=$(mktemp -d)
trap 'rm -rf "$stage"' EXIT
mkdir -p "$stage/bin" "$stage/lib" "$stage/plans/tiny" "$stage/plans/big"
for b in "${bins[@]}"; do
  objcopy --strip-debug "$build/bin/$b" "$stage/bin/$b"
done
objcopy --strip-debug "$build/test/Unit/AutoparUnitTests" \
  "$stage/bin/AutoparUnitTests"

# Libraries: everything ldd resolves except the C library's own, the
# compiler's runtime, and CUDA's.
for b in "$stage"/bin/*; do
  ldd "$b" | awk '/=> \// {print $3}'
done | sort -u | while read -r lib; do
  case "$(basename "$lib")" in
    libc.so* | libm.so* | libpthread.so* | libdl.so* | librt.so* | \
      libutil.so* | libresolv.so* | ld-linux* | libgcc_s.so* | \
      libstdc++.so* | libcuda.so* | libcudart.so* | libcublas*.so* | \
      libnccl.so* | libnvidia*) ;;
    *) cp -L "$lib" "$stage/lib/" ;;
  esac
done

# The programs.
modelgen=(/usr/bin/python3 tools/autopar-modelgen)
# With GPT-2's dropouts in training mode: both backends draw the same masks
# (runtime/DropoutMask.h), so the losses still agree.
"${modelgen[@]}" --model gpt2 --layers 2 --hidden 64 --heads 4 --ffn 256 \
  --vocab 100 --max-pos 32 --seq 16 --dropout 0.1 \
  -o "$stage/plans/tiny/model.onnx" \
  2>/dev/null || die "autopar-modelgen failed (python3-onnx?)"
# fp32, so that the CPU and GPU losses agree to 1e-5; flash attention
# pinned (fp32 plans default to materialized scores), so that the check
# compares the CUDA flash kernels with the CPU's.
"$build/bin/autopar" "$stage/plans/tiny/model.onnx" --gpus 1 \
  --global-batch 8 --fix precision=fp32,mbs=8,attention=flash \
  -o "$stage/plans/tiny/plan" >/dev/null 2>&1 ||
  die "planning the tiny GPT failed"
"${modelgen[@]}" "${big[@]}" -o "$stage/plans/big/model.onnx" 2>/dev/null ||
  die "autopar-modelgen failed"
"$build/bin/autopar" "$stage/plans/big/model.onnx" --gpu h200 --gpus 1 \
  --global-batch "$big_batch" --fix "mbs=$big_batch,attention=materialized" \
  -o "$stage/plans/big/plan" >"$stage/plans/big/summary.txt" 2>/dev/null ||
  die "planning the big GPT failed"
python3 bench/plan-gemm-shapes.py "$stage/plans/big/plan/stage0.air" \
  >"$stage/plans/big/shapes.txt"
rm -rf "$stage/plans"/*/plan/report.html "$stage/plans"/*/plan/launch

mkdir -p carry
rm -f carry/autopar-gpu.tar.xz
tar -C "$stage" -cJf carry/autopar-gpu.tar.xz bin lib plans
{
  echo "built from $(git rev-parse --short HEAD 2>/dev/null || echo '?')" \
    "$(git status --porcelain 2>/dev/null | grep -q . && echo '(with local changes)')" \
    "in $build on $(date -u +%Y-%m-%dT%H:%MZ)"
  (cd "$stage" && find bin lib plans -type f | sort)
} >carry/MANIFEST
size=$(du -b carry/autopar-gpu.tar.xz | cut -f1)
echo "carry/autopar-gpu.tar.xz: $((size / 1024 / 1024)) MiB"
((size < 56 * 1024 * 1024)) || die "the bundle is over 56 MiB; the device tool carries 64 MiB with the tree"
