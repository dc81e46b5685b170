#!/usr/bin/env python3
"""Sums the results of one or more lit runs into one closing line.

Usage: lit-summary.py [--expect-suite NAME]... --run LABEL PREFIX RC ...
                      [--check LABEL RC]...

Each --run names a lit invocation: LABEL for messages, PREFIX for its result
files (PREFIX.json from `lit -o`, PREFIX.xml from `lit --xunit-xml-output`)
and RC, lit's exit status. Each --check is one more test that is not a lit
run (the fuzzer's), passed when its RC is 0. Prints a line per run, the failing tests, and last
`N passed, M failed` (with `, K skipped` when some were unsupported or
skipped). Exits 1 when anything failed or no test ran.

Both files are read because each misses something in lit 14: the JSON report
drops SKIPPED tests (a GTEST_SKIP in a unit test), and the xUnit report, like
lit 14's exit status, counts an unexpected pass (XPASS) as a success. We count
XPASS as a failure, as later lit versions do.
"""

import argparse
import json
import os
import sys
import xml.etree.ElementTree as ET

PASSED = {"PASS", "FLAKYPASS", "XFAIL"}
FAILED = {"FAIL", "XPASS", "UNRESOLVED", "TIMEOUT"}
SKIPPED = {"UNSUPPORTED", "SKIPPED", "EXCLUDED"}


def summarize_run(label, prefix, rc, expected_suites):
    """Returns (passed, failed, skipped, problems) for one lit run."""
    json_path, xml_path = prefix + ".json", prefix + ".xml"
    problems = []
    if not (os.path.isfile(json_path) and os.path.isfile(xml_path)):
        return 0, 1, 0, ["lit wrote no results (exit status %d); see its "
                         "output above" % rc]
    try:
        with open(json_path) as f:
            tests = json.load(f)["tests"]
        suites = ET.parse(xml_path).getroot().findall("testsuite")
    except (OSError, ValueError, KeyError, ET.ParseError) as e:
        return 0, 1, 0, ["cannot read lit results %s.{json,xml}: %s" %
                         (prefix, e)]

    passed = failed = skipped = 0
    for test in tests:
        code = test.get("code")
        if code in PASSED:
            passed += 1
        elif code in SKIPPED:
            skipped += 1
        else:
            # FAILED codes, and any code this script does not know.
            failed += 1
            problems.append("%s: %s" % (code, test.get("name")))

    # SKIPPED/EXCLUDED tests appear only in the xUnit report.
    xml_total = sum(int(s.get("tests", 0)) for s in suites)
    skipped += max(0, xml_total - len(tests))

    ran = {s.get("name"): int(s.get("tests", 0)) for s in suites}
    for suite in expected_suites:
        if not ran.get(suite):
            failed += 1
            problems.append("suite '%s' ran no tests (is its binary built?)" %
                            suite)

    if rc != 0 and failed == 0:
        failed += 1
        problems.append("lit exited with status %d" % rc)
    return passed, failed, skipped, problems


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--expect-suite", action="append", default=[],
                        metavar="NAME",
                        help="fail unless this lit suite ran a test")
    parser.add_argument("--run", action="append", nargs=3, required=True,
                        metavar=("LABEL", "PREFIX", "RC"))
    parser.add_argument("--check", action="append", nargs=2, default=[],
                        metavar=("LABEL", "RC"))
    args = parser.parse_args()

    totals = [0, 0, 0]
    all_problems = []
    for label, prefix, rc in args.run:
        p, f, s, problems = summarize_run(label, prefix, int(rc),
                                          args.expect_suite)
        totals = [totals[0] + p, totals[1] + f, totals[2] + s]
        print("lit run %s: passed %d, failed %d, skipped %d" %
              (label, p, f, s))
        all_problems += ["%s: %s" % (label, msg) for msg in problems]

    for label, rc in args.check:
        ok = int(rc) == 0
        totals[0 if ok else 1] += 1
        print("check %s: %s" % (label, "passed" if ok else
                                "failed (exit status %s)" % rc))
        if not ok:
            all_problems.append("%s: exit status %s" % (label, rc))

    passed, failed, skipped = totals
    if all_problems:
        print("\nFailures:")
        for msg in all_problems:
            print("  " + msg)
    if passed + failed == 0:
        print("error: no test ran")
        failed = max(failed, 1)

    line = "%d passed, %d failed" % (passed, failed)
    if skipped:
        line += ", %d skipped" % skipped
    print(line)
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
