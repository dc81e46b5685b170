# -*- Python -*-
# The autopar unit test suite: every test case of the gtest binaries named
# *Tests in build/test/Unit (today just AutoparUnitTests) is one lit test.
#
# lit reaches this suite from build/test (the parent suite walks into Unit/
# and finds build/test/Unit/lit.site.cfg.py), or directly:
#   python3 /usr/lib/llvm-14/build/utils/lit/lit.py -sv build/test/Unit

import os

import lit.formats

if not hasattr(config, "autopar_unit_tests_dir"):
    lit_config.fatal(
        "test/Unit/lit.cfg.py was loaded without a site configuration; run "
        "lit on the build tree (e.g. build/test), not on the source tree")

config.name = "autopar-unit"
config.test_format = lit.formats.GoogleTest(".", "Tests")

# The tests are the binaries, so both roots are the build directory.
config.test_source_root = config.autopar_unit_tests_dir
config.test_exec_root = config.autopar_unit_tests_dir
config.excludes = ["CMakeFiles"]

# Sanitizer settings from the caller (scripts/test.sh sets them for the
# sanitized build) reach the test binaries.
for var in ["ASAN_OPTIONS", "UBSAN_OPTIONS", "LSAN_OPTIONS",
            "ASAN_SYMBOLIZER_PATH"]:
    if os.environ.get(var):
        config.environment[var] = os.environ[var]
