#!/usr/bin/env bash
# The CRC32C (ISA-L's crc32_iscsi, libisal-dev) and memcpy rates of one core
# over 64 KiB, 4 MiB and 64 MiB buffers: what `verify-transfers=on` costs
# per byte of a pipeline message (cost/Collectives.cpp cites the figures).
# Usage: bench/crc32c-rate.sh
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."
dir=$(mktemp -d)
trap 'rm -rf "$dir"' EXIT
"${CXX:-c++}" -std=c++17 -O2 bench/crc32c-rate.cpp -lisal -o "$dir/crc32c-rate"
"$dir/crc32c-rate"
