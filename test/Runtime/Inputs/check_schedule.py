#!/usr/bin/env python3
"""Checks `autopar-run --steps N` step lines (loss and lr) against
PyTorch's (lr_schedule.ref.json, made by torch_gpt2_tiny.py).

  check_schedule.py REF.json MODEL CASE LOG [REL]

Prints "MODEL CASE: N steps match torch (losses within E, rates within F)"
or a MISMATCH line, and exits 1 on a mismatch; REL defaults to 1e-6.
"""

import json
import re
import sys

STEP = re.compile(r"^step (\d+) loss (\S+) .* lr (\S+)$")


def main(argv):
    ref_path, model, case, log_path = argv[1], argv[2], argv[3], argv[4]
    rel = float(argv[5]) if len(argv) > 5 else 1e-6
    with open(ref_path) as f:
        want = json.load(f)["models"][model][case]
    case = model + " " + case
    got = {}
    with open(log_path) as f:
        for line in f:
            m = STEP.match(line.strip())
            if m:
                got[int(m.group(1))] = (float(m.group(2)), float(m.group(3)))
    if sorted(got) != list(range(1, len(want["losses"]) + 1)):
        print("MISMATCH: %s: steps %s in the log" % (case, sorted(got)))
        return 1
    worst = {"loss": 0.0, "lr": 0.0}
    for step, (loss, lr) in sorted(got.items()):
        for what, a, b in (("loss", loss, want["losses"][step - 1]),
                           ("lr", lr, want["lrs"][step - 1])):
            err = abs(a - b) / abs(b)
            worst[what] = max(worst[what], err)
            if not err <= rel:
                print("MISMATCH: %s step %d %s %.9g vs torch %.9g (relative "
                      "%.1e > %g)" % (case, step, what, a, b, err, rel))
                return 1
    print("%s: %d steps match torch (losses within %.0e, rates within %.0e)"
          % (case, len(got), max(worst["loss"], 1e-12),
             max(worst["lr"], 1e-12)))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
