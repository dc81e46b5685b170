#!/usr/bin/env bash
# Installs what autopar's build and tests need on Debian 12 (bookworm).
# Does nothing, quickly, when everything is already installed.
set -euo pipefail

packages=(
  cmake
  ninja-build
  g++
  libasan8        # AddressSanitizer runtime for g++ 12 (AUTOPAR_SANITIZE)
  libubsan1       # UndefinedBehaviorSanitizer runtime for g++ 12
  llvm-14-dev     # LLVM ADT/Support headers, libraries and CMake config
  llvm-14-tools   # lit, FileCheck, not, count, split-file
  zlib1g-dev      # LLVMSupport's CMake config links ZLIB::ZLIB
  libgtest-dev
  libopenblas-dev # CBLAS GEMMs of the CPU runtime (runtime/cpu/)
  libopenmpi-dev  # MPI for multi-rank jobs (runtime/cpu/MpiCommunicator.cpp)
  openmpi-bin     # mpirun: multi-rank runs and test/Runtime/mpi-*.test
  pkgconf         # finds OpenBLAS for CMake
  libonnx-dev     # ONNX's generated protobuf classes (frontend/)
  libprotobuf-dev
  protobuf-compiler # protoc: tests encode text-format models to binary
  clang-14        # builds the libFuzzer target (build-fuzz)
  libclang-rt-14-dev # libFuzzer and clang's sanitizer runtimes
  googletest
  clang-format-14
  git
  python3         # runs lit
  time            # GNU time, for bench/import-speed.sh
  python3-onnx    # tools/autopar-modelgen: generated models for tests/benchmarks
)
# --with-chromium: also the headless browser the report test renders with
# (test/Tools/autopar-report-render.test skips without it).
for arg in "$@"; do
  case "$arg" in
    --with-chromium) packages+=(chromium) ;;
    *) echo "install-deps: unknown argument '$arg'" >&2; exit 2 ;;
  esac
done

missing=()
for pkg in "${packages[@]}"; do
  status=$(dpkg-query -W -f='${db:Status-Status}' "$pkg" 2>/dev/null || true)
  if [[ "$status" != installed ]]; then
    missing+=("$pkg")
  fi
done

if ((${#missing[@]} == 0)); then
  echo "install-deps: all ${#packages[@]} packages already installed"
  exit 0
fi

echo "install-deps: installing ${missing[*]}"
sudo=()
if ((EUID != 0)); then
  if command -v sudo >/dev/null 2>&1; then
    sudo=(sudo)
  else
    echo "install-deps: error: need root (or sudo) to install: ${missing[*]}" >&2
    exit 1
  fi
fi

"${sudo[@]}" env DEBIAN_FRONTEND=noninteractive apt-get update
"${sudo[@]}" env DEBIAN_FRONTEND=noninteractive \
  apt-get install -y --no-install-recommends "${missing[@]}"
