#!/usr/bin/env python3
"""Checks the figures of `autopar-run --steps N` step lines (`step N loss X
grad_norm G ...`, `loss_scale S`, `skipped`) against PyTorch's, or against
another run's.

  check_steps.py torch REF.json MODEL CASE LOG [REL]
  check_steps.py compare REF.log LOG [REL]

`torch`: REF.json's models.MODEL.CASE holds per-step lists: `losses` (the
loss), `grad_norms_f64` (grad_norm), `loss_scales` (loss_scale) and
`skipped` (whether the line says skipped); each present list is checked,
numbers within REL relative (default 1e-6), flags exactly. `compare`: the
two logs' losses and grad_norms within REL (default 1e-5), the same steps
and flags. Prints "... N steps match ..." with the worst relative errors,
or a MISMATCH line, and exits 1 on a mismatch.
"""

import json
import sys

# The JSON lists and the step line's words they are checked against.
FIELDS = (("losses", "loss"), ("grad_norms_f64", "grad_norm"),
          ("loss_scales", "loss_scale"))


def read_steps(path):
    steps = {}
    with open(path) as f:
        for line in f:
            words = line.split()
            if len(words) < 2 or words[0] != "step":
                continue
            fields = {"skipped": "skipped" in words}
            for i in range(2, len(words) - 1):
                if words[i] in ("loss", "grad_norm", "loss_scale"):
                    fields[words[i]] = float(words[i + 1])
            steps[int(words[1])] = fields
    return steps


def check(label, want, got, rel):
    """want: {word: [per step]}; got: read_steps. Returns the exit code."""
    count = max(len(v) for v in want.values())
    if sorted(got) != list(range(1, count + 1)):
        print("MISMATCH: %s: steps %s in the log, %d wanted"
              % (label, sorted(got), count))
        return 1
    worst = {}
    for word, values in want.items():
        for step, value in enumerate(values, 1):
            have = got[step].get(word)
            if word == "skipped":
                if have != value:
                    print("MISMATCH: %s step %d: skipped %s, want %s"
                          % (label, step, have, value))
                    return 1
                continue
            if have is None:
                print("MISMATCH: %s step %d: no %s on the line"
                      % (label, step, word))
                return 1
            err = abs(have - value) / max(abs(value), 1e-30)
            worst[word] = max(worst.get(word, 0.0), err)
            if not err <= rel:
                print("MISMATCH: %s step %d %s %.9g vs %.9g (relative %.1e "
                      "> %g)" % (label, step, word, have, value, err, rel))
                return 1
    print("%s: %d steps match (%s)" % (label, count, ", ".join(
        "%s within %.0e" % (w, max(e, 1e-12)) for w, e in sorted(
            worst.items()))))
    return 0


def main(argv):
    if len(argv) >= 6 and argv[1] == "torch":
        ref_path, model, case, log_path = argv[2:6]
        rel = float(argv[6]) if len(argv) > 6 else 1e-6
        with open(ref_path) as f:
            ref = json.load(f)["models"][model][case]
        want = {word: ref[key] for key, word in FIELDS if key in ref}
        if "skipped" in ref:
            want["skipped"] = ref["skipped"]
        return check(model + " " + case + " vs torch", want,
                     read_steps(log_path), rel)
    if len(argv) >= 4 and argv[1] == "compare":
        rel = float(argv[4]) if len(argv) > 4 else 1e-5
        ref = read_steps(argv[2])
        want = {}
        for word in ("loss", "grad_norm", "loss_scale", "skipped"):
            if ref and all(word in f for f in ref.values()):
                want[word] = [ref[s][word] for s in sorted(ref)]
        if not want:
            print("MISMATCH: no steps in %s" % argv[2])
            return 1
        return check("runs", want, read_steps(argv[3]), rel)
    print(__doc__)
    return 2


if __name__ == "__main__":
    sys.exit(main(sys.argv))
