#!/usr/bin/env bash
# Measures this machine for the `cpu` device of cost/Devices.def: fp32 GEMM
# rate of a plain blocked loop, STREAM triad/copy bandwidth and core-to-core
# latency (bench/cpu-calibrate.cpp), memory size, and the sequential
# bandwidth and 4 KiB read latency of the disk under bench/ (direct I/O,
# 1 GiB), and with a build and mpirun the runtime's collective call latency
# (bench/collective-latency.py: chained scalar all-reduces on 2 ranks). Run
# it on an idle machine; Devices.def names the date and the command of the
# figures it holds.
# Usage: bench/cpu-calibrate.sh [--calibration FILE.json]
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."
dir=$(mktemp -d)
disk=$(mktemp -d bench/.cpu-calibrate.XXXXXX)
trap 'rm -rf "$dir" "$disk"' EXIT
"${CXX:-c++}" -std=c++17 -O3 -march=native -pthread \
  bench/cpu-calibrate.cpp -o "$dir/cpu-calibrate"
echo "cpu: $(sed -n 's/^model name[[:space:]]*: //p' /proc/cpuinfo | head -1)"
echo "memory: $(awk '/^MemTotal/ {print $2 * 1024}' /proc/meminfo) bytes"
"$dir/cpu-calibrate" "$@"

# dd's last line ends with "<seconds> s, <rate>"; print the rate.
rate() { tail -1 | sed 's/.*s, //'; }
w=$(dd if=/dev/zero of="$disk/f" bs=16M count=64 oflag=direct 2>&1 | rate)
r=$(dd if="$disk/f" of=/dev/null bs=16M iflag=direct 2>&1 | rate)
lat=$(dd if="$disk/f" of=/dev/null bs=4k count=4000 iflag=direct 2>&1 |
  tail -1 | awk '{print $(NF-3) / 4000 * 1e6}')
echo "disk: write $w, read $r, 4 KiB read ${lat} us"

build=${AUTOPAR_BUILD:-build}
if [[ -x "$build/bin/autopar-run" ]] && command -v mpirun > /dev/null; then
  python3 bench/collective-latency.py "$build/bin/autopar-run" "$dir"
else
  echo "collective latency: skipped (needs $build/bin/autopar-run and mpirun)"
fi
