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
  libeigen3-dev   # vectorized exp, tanh and erf of CPU kernels (runtime/cpu/)
  libisal-dev     # ISA-L's crc32_iscsi: CRC32C of offloaded blocks (runtime/)
  libopenmpi-dev  # MPI for multi-rank jobs (runtime/cpu/MpiCommunicator.cpp)
  libcpp-httplib-dev # HTTP server of `autopar monitor` (monitor/)
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
  python3-venv    # .venv-test/ for onnxruntime (--onnxruntime, below)
)
# --with-chromium: also the headless browser the report and live-panel tests
# render in (scripts/test.sh asks for it unless --no-chromium; the tests
# that need it skip without it).
# --onnxruntime: also onnxruntime from PyPI, a test-only dependency (below).
onnxruntime=0
for arg in "$@"; do
  case "$arg" in
    --with-chromium) packages+=(chromium) ;;
    --onnxruntime) onnxruntime=1 ;;
    *) echo "install-deps: unknown argument '$arg'" >&2; exit 2 ;;
  esac
done

# onnxruntime is the reference that test/Runtime/ort-models.test compares the
# runtime's outputs with. Debian packages no onnxruntime and its python3
# refuses `pip install` (PEP 668), so it goes into a virtual environment of
# Debian's python3 that also sees the system packages (python3-onnx, numpy):
# .venv-test/ in the checkout (ignored by git; lit's %ort_python). Failing
# to install it (no network) is not an error: those tests are then
# unsupported. Quick when it is already there.
install_onnxruntime() {
  local venv python log
  local version='import onnxruntime; print(onnxruntime.__version__)'
  venv="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)/.venv-test"
  python="$venv/bin/python3"
  if [[ -x "$python" ]] &&
    "$python" -c 'import onnxruntime, onnx, numpy' >/dev/null 2>&1; then
    echo "install-deps: onnxruntime $("$python" -c "$version")" \
      "already in .venv-test"
    return 0
  fi
  if [[ ! -x "$python" ]]; then
    rm -rf "$venv"
    if ! log=$(/usr/bin/python3 -m venv --system-site-packages "$venv" 2>&1)
    then
      echo "install-deps: note: onnxruntime could not be installed (the" \
        "onnxruntime comparisons will be unsupported): python3 -m venv" \
        "failed: $log" >&2
      rm -rf "$venv"
      return 0
    fi
  fi
  echo "install-deps: installing onnxruntime from PyPI into .venv-test"
  if ! log=$(timeout 600 "$python" -m pip install --disable-pip-version-check \
    --no-input --timeout 20 --retries 1 onnxruntime 2>&1); then
    echo "install-deps: note: onnxruntime could not be installed from PyPI" \
      "(the onnxruntime comparisons will be unsupported):" >&2
    tail -n 5 <<<"$log" >&2
    return 0
  fi
  if ! "$python" -c 'import onnxruntime, onnx, numpy' >/dev/null 2>&1; then
    echo "install-deps: note: onnxruntime was installed but does not import" \
      "(the onnxruntime comparisons will be unsupported)" >&2
    return 0
  fi
  echo "install-deps: onnxruntime $("$python" -c "$version")" \
    "installed in .venv-test"
}

missing=()
for pkg in "${packages[@]}"; do
  status=$(dpkg-query -W -f='${db:Status-Status}' "$pkg" 2>/dev/null || true)
  if [[ "$status" != installed ]]; then
    missing+=("$pkg")
  fi
done

if ((${#missing[@]} == 0)); then
  echo "install-deps: all ${#packages[@]} packages already installed"
  if ((onnxruntime)); then
    install_onnxruntime
  fi
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
if ((onnxruntime)); then
  install_onnxruntime
fi
