#!/usr/bin/env bash
# Installs the dependencies, builds autopar and runs every test: the lit
# regression suite and the gtest unit suite, first in build/ (optimized, with
# assertions), then in build-asan/ under AddressSanitizer and
# UndefinedBehaviorSanitizer. Ends with one line, `N passed, M failed`
# (`, K skipped` when some tests were unsupported), summed over the runs.
#
# Usage: scripts/test.sh [--no-sanitize] [--no-chromium]
#   --no-sanitize    skip the sanitized build (quicker)
#   --no-chromium    do not install Chromium (the tests that render the report
#                    and the live panel in it are then skipped)
set -euo pipefail

usage() { sed -n '2,10s/^# \{0,1\}//p' "$0"; }

sanitize=1
deps=(--with-chromium)
for arg in "$@"; do
  case "$arg" in
    --no-sanitize) sanitize=0 ;;
    --no-chromium) deps=() ;;
    --with-chromium) deps=(--with-chromium) ;; # the default; kept for scripts
    -h | --help) usage; exit 0 ;;
    *) echo "test.sh: unknown argument '$arg'" >&2; usage >&2; exit 2 ;;
  esac
done

cd "$(dirname "${BASH_SOURCE[0]}")/.."
root=$(pwd)

die() {
  echo "test.sh: error: $*" >&2
  exit 1
}

# --onnxruntime: onnxruntime from PyPI into .venv-test/, the reference of
# test/Runtime/ort-models.test; when PyPI cannot be reached it says so and
# that test is unsupported.
bash scripts/install-deps.sh --onnxruntime "${deps[@]}"

lit=/usr/lib/llvm-14/build/utils/lit/lit.py
[[ -f "$lit" ]] || die "lit not found at $lit (llvm-14-tools)"

# configure_and_build DIR OPT_FLAGS [CMAKE_ARGS...]
configure_and_build() {
  local dir=$1 opt=$2
  shift 2
  # A tree configured earlier with another generator cannot be reused.
  if [[ -f "$dir/CMakeCache.txt" ]] &&
    ! grep -q '^CMAKE_GENERATOR:INTERNAL=Ninja$' "$dir/CMakeCache.txt"; then
    rm -rf "$dir/CMakeCache.txt" "$dir/CMakeFiles"
  fi
  echo "==> Configuring $dir"
  # RelWithDebInfo with the flags spelled out: CMake's default for it adds
  # -DNDEBUG, and the tests must run with assertions on.
  cmake -G Ninja -S "$root" -B "$dir" \
    -DCMAKE_BUILD_TYPE=RelWithDebInfo \
    -DCMAKE_C_FLAGS_RELWITHDEBINFO="$opt" \
    -DCMAKE_CXX_FLAGS_RELWITHDEBINFO="$opt" \
    "$@" || die "configuring $dir failed"
  if grep -q -- '-DNDEBUG' "$dir/compile_commands.json"; then
    die "$dir compiles with -DNDEBUG; assertions would be off"
  fi
  echo "==> Building $dir"
  # Ninja's default parallelism (cores + 2) fits 2 cores and 24 GiB.
  cmake --build "$dir" || die "building $dir failed"
}

# run_lit DIR: runs both lit suites of the build in DIR; records the results
# for the summary. A failing test does not stop the script.
summary_args=()
run_lit() {
  local dir=$1 rc=0
  local results="$dir/lit-results"
  rm -f "$results.json" "$results.xml"
  echo "==> Testing $dir"
  # A hung test must not eat the whole CI budget: a run gets 30 minutes.
  timeout 1800 python3 "$lit" -sv --no-progress-bar \
    -o "$results.json" --xunit-xml-output "$results.xml" \
    "$dir/test" || rc=$?
  summary_args+=(--run "$dir" "$results" "$rc")
}

# LeakSanitizer stops the world with ptrace; in a sandbox that forbids
# ptrace (or runs us under a tracer) it dies with a fatal error instead of
# checking. Probe once, and turn leak checking off only when it cannot work.
leak_sanitizer_works() {
  local tmp out
  tmp=$(mktemp -d)
  printf '%s\n' '#include <cstdlib>' \
    'int main() { void *volatile p = std::malloc(16); p = nullptr; }' \
    >"$tmp/leak.cpp"
  if ! g++ -fsanitize=address "$tmp/leak.cpp" -o "$tmp/leak" 2>/dev/null; then
    rm -rf "$tmp"
    return 1
  fi
  out=$(ASAN_OPTIONS=detect_leaks=1 "$tmp/leak" 2>&1 || true)
  rm -rf "$tmp"
  [[ "$out" == *"LeakSanitizer: detected memory leaks"* ]]
}

configure_and_build build "-O2 -g"
run_lit build

if ((sanitize)); then
  configure_and_build build-asan "-O1 -g" -DAUTOPAR_SANITIZE=ON
  if leak_sanitizer_works; then
    detect_leaks=1
  else
    echo "test.sh: note: LeakSanitizer cannot run here (no ptrace?);" \
      "testing build-asan with detect_leaks=0"
    detect_leaks=0
  fi
  # Ours first, so that options the caller set win.
  export ASAN_OPTIONS="detect_leaks=$detect_leaks${ASAN_OPTIONS:+:$ASAN_OPTIONS}"
  export UBSAN_OPTIONS="print_stacktrace=1${UBSAN_OPTIONS:+:$UBSAN_OPTIONS}"
  run_lit build-asan
else
  echo "==> Skipping the sanitized build (--no-sanitize)"
fi

# The importer's libFuzzer target, built with clang, runs for 60 seconds from
# the text-format test models (encoded to binary) and the inputs that once
# crashed it (test/fuzz/regressions). A crash fails the run; its input is
# written to build-fuzz/artifacts/ to become a new regression input.
if ((sanitize)); then
  fuzz_rc=0
  cmake -G Ninja -S "$root" -B build-fuzz -DAUTOPAR_FUZZ=ON \
    -DCMAKE_C_COMPILER=clang-14 -DCMAKE_CXX_COMPILER=clang++-14 \
    -DCMAKE_BUILD_TYPE=RelWithDebInfo -DCMAKE_CXX_FLAGS_RELWITHDEBINFO="-O1 -g" \
    >/dev/null && cmake --build build-fuzz || die "building build-fuzz failed"
  corpus=build-fuzz/corpus
  rm -rf "$corpus" build-fuzz/artifacts && mkdir -p "$corpus" build-fuzz/artifacts
  for model in test/Frontend/*.pbtxt test/Frontend/Inputs/*.pbtxt examples/*.pbtxt; do
    grep -v '^#' "$model" | protoc --encode=onnx.ModelProto -I/usr/include \
      /usr/include/onnx/onnx.proto >"$corpus/$(basename "$model").onnx" \
      2>/dev/null || rm -f "$corpus/$(basename "$model").onnx"
  done
  echo "==> Fuzzing the importer for 60 seconds"
  build-fuzz/bin/autopar-import-fuzzer -max_total_time=60 -max_len=65536 \
    -timeout=10 -rss_limit_mb=4096 -print_final_stats=1 \
    -artifact_prefix=build-fuzz/artifacts/ "$corpus" test/fuzz/regressions \
    2>build-fuzz/fuzz.log || fuzz_rc=$?
  grep -E '^(stat::number_of_executed_units|Done|SUMMARY)' build-fuzz/fuzz.log || true
  if ((fuzz_rc)); then
    tail -40 build-fuzz/fuzz.log
  fi
  summary_args+=(--check importer-fuzz "$fuzz_rc")
fi

echo "==> Summary"
python3 scripts/lit-summary.py \
  --expect-suite autopar --expect-suite autopar-unit "${summary_args[@]}"
