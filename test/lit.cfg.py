# -*- Python -*-
# The autopar regression suite: .air and .test files run as shell tests.
#
# Run it through the configured build tree, never the source tree:
#   python3 /usr/lib/llvm-14/build/utils/lit/lit.py -sv build/test
# That also picks up the unit test suite, a nested suite whose configuration
# lives in build/test/Unit/lit.site.cfg.py (see test/Unit/lit.cfg.py).

import os
import shutil
import subprocess

import lit.formats

if not hasattr(config, "autopar_obj_root"):
    lit_config.fatal(
        "test/lit.cfg.py was loaded without a site configuration; run lit on "
        "the build tree (e.g. build/test), not on the source tree")

config.name = "autopar"
# Run RUN lines with bash, so pipes, redirections and `cd` behave as in a
# shell; `set -o pipefail` is on (config.pipefail defaults to True).
config.test_format = lit.formats.ShTest(execute_external=True)
config.suffixes = [".air", ".test", ".pbtxt"]

config.test_source_root = os.path.dirname(__file__)
config.test_exec_root = os.path.join(config.autopar_obj_root, "test")

# Not tests: helper inputs, test-only pass sources, and build/config files.
# Unit/ must stay discoverable: lit finds build/test/Unit/lit.site.cfg.py
# there and runs it as its own (GoogleTest) suite, exactly once.
config.excludes = ["Inputs", "lib", "CMakeLists.txt", "README.txt",
                   "lit.cfg.py", "lit.site.cfg.py", "lit.site.cfg.py.in"]

# Tools: the just-built autopar tools first, then LLVM's FileCheck, not,
# count and split-file (Debian keeps them out of the default PATH).
config.environment["PATH"] = os.pathsep.join(
    [config.autopar_tools_dir, config.llvm_tools_dir,
     config.environment.get("PATH", "")])

# Strict FileCheck, as in MLIR: variables do not leak across CHECK-LABELs and
# every --check-prefix must be used.
config.environment["FILECHECK_OPTS"] = (
    "-enable-var-scope --allow-unused-prefixes=false")

# Sanitizer settings from the caller (scripts/test.sh sets them for the
# sanitized build) reach the tools under test.
for var in ["ASAN_OPTIONS", "UBSAN_OPTIONS", "LSAN_OPTIONS",
            "ASAN_SYMBOLIZER_PATH"]:
    if os.environ.get(var):
        config.environment[var] = os.environ[var]

config.substitutions.append(("%autopar_src", config.autopar_src_root))
config.substitutions.append(("%autopar_obj", config.autopar_obj_root))
# %verify_plan DIR: plan.air round-trips through autopar-opt and every
# stage<S>.air is reproduced from it by the pipeline the plan records.
config.substitutions.append(
    ("%verify_plan", "bash " + os.path.join(config.autopar_src_root, "test",
                                            "lib", "verify-plan-dir.sh")))

clang_format = (shutil.which("clang-format-14") or
                os.path.join(config.llvm_tools_dir, "clang-format"))
config.substitutions.append(("%clang_format", clang_format))

# Importer tests write models as protobuf text; %encode_onnx turns one into
# the binary form (stdin to stdout) for tests of the binary reader.
config.substitutions.append(
    ("%encode_onnx", "protoc --encode=onnx.ModelProto -I/usr/include "
                     "/usr/include/onnx/onnx.proto"))

# Real third-party models live beside the checkout in ../shared/models;
# tests that use them say REQUIRES: shared-models.
shared_models = os.path.normpath(
    os.path.join(config.autopar_src_root, "..", "shared", "models"))
config.substitutions.append(("%shared_models", shared_models))
if os.path.isdir(shared_models):
    config.available_features.add("shared-models")

# Features for REQUIRES/UNSUPPORTED lines.
if (config.autopar_is_git_checkout or
        os.path.exists(os.path.join(config.autopar_src_root, ".git"))):
    config.available_features.add("git-checkout")
if config.autopar_sanitize:
    config.available_features.add("asan")
# The report renders in a real browser when Chromium is installed
# (scripts/test.sh --with-chromium).
if shutil.which("chromium"):
    config.available_features.add("chromium")
# Multi-rank runtime tests start autopar-run under OpenMPI's mpirun (test/
# Runtime/mpi-*.test). mpirun refuses to run as root without these (CI and
# sandboxes often are root); oversubscription is asked for on the command
# line, as test machines have fewer cores than ranks.
if shutil.which("mpirun"):
    config.available_features.add("mpi")
    config.environment["OMPI_ALLOW_RUN_AS_ROOT"] = "1"
    config.environment["OMPI_ALLOW_RUN_AS_ROOT_CONFIRM"] = "1"
# The CUDA backend: `cuda-backend` when this build has it (AUTOPAR_CUDA),
# `cuda-gpu` when nvidia-smi also lists a GPU (CI has none; scripts/
# gpu-check.sh runs those tests on a GPU machine).
if getattr(config, "autopar_cuda", False):
    config.available_features.add("cuda-backend")
    smi = shutil.which("nvidia-smi")
    if smi:
        try:
            listed = subprocess.run([smi, "-L"], stdout=subprocess.PIPE,
                                    stderr=subprocess.DEVNULL, timeout=30,
                                    text=True).stdout
        except (OSError, subprocess.SubprocessError):
            listed = ""
        if "GPU" in listed:
            config.available_features.add("cuda-gpu")
# tools/autopar-modelgen runs on Debian's python3 with python3-onnx.
if os.path.exists("/usr/bin/python3") and subprocess.call(
        ["/usr/bin/python3", "-c", "import onnx"], stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL) == 0:
    config.available_features.add("python3-onnx")
# onnxruntime, the reference of test/Runtime/ort-models.test, comes from PyPI
# into the checkout's .venv-test/ (scripts/install-deps.sh --onnxruntime, run
# by scripts/test.sh); AUTOPAR_ORT_PYTHON names another interpreter. Tests
# run it as %ort_python and say REQUIRES: onnxruntime; without it (no network
# when the script ran) they are unsupported.
ort_python = os.environ.get("AUTOPAR_ORT_PYTHON") or os.path.join(
    config.autopar_src_root, ".venv-test", "bin", "python3")
config.substitutions.append(("%ort_python", ort_python))
if os.path.isfile(ort_python) and subprocess.call(
        [ort_python, "-c", "import onnxruntime, onnx, numpy"],
        stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL) == 0:
    config.available_features.add("onnxruntime")

if not os.path.isfile(os.path.join(config.autopar_tools_dir, "autopar-opt")):
    lit_config.fatal("autopar-opt not found in %s; build it first "
                     "(ninja -C %s autopar-opt)" %
                     (config.autopar_tools_dir, config.autopar_obj_root))
