#!/usr/bin/env python3
"""Compares a training program's numbers with PyTorch's reference.

  torch_training.py tokens REF.json FILE
      writes REF.json's input_ids as little-endian int32 tokens (--data)
  torch_training.py grads REF.json OUTDIR
      OUTDIR is `autopar-run --eval` of the autodiff program: checks the loss
      (1e-5 relative) and every parameter's gradient norm (1e-4 relative),
      and that every reference parameter has a gradient
  torch_training.py steps REF.json LOG
      LOG is `autopar-run --steps 3` output: checks the three AdamW losses
      (1e-4 relative)
Prints one line per check and exits 1 on the first mismatch.
"""

import array
import json
import math
import os
import sys


def fail(message):
    print("MISMATCH: " + message)
    sys.exit(1)


def close(actual, expected, rel, what):
    err = abs(actual - expected) / max(abs(expected), 1e-30)
    if not err <= rel:
        fail("%s: %.9g vs torch %.9g (relative error %.2e > %g)"
             % (what, actual, expected, err, rel))
    return err


def read_f32(path):
    values = array.array("f")
    with open(path, "rb") as f:
        values.frombytes(f.read())
    if sys.byteorder != "little":
        values.byteswap()
    return values


def main(argv):
    command, ref_path, target = argv[1], argv[2], argv[3]
    with open(ref_path) as f:
        ref = json.load(f)
    if command == "tokens":
        ids = array.array("i", [t for row in ref["input_ids"] for t in row])
        if sys.byteorder != "little":
            ids.byteswap()
        with open(target, "wb") as f:
            f.write(ids.tobytes())
        return
    if command == "grads":
        with open(os.path.join(target, "outputs.json")) as f:
            outputs = json.load(f)["outputs"]
        by_name = {o["name"]: os.path.join(target, o["file"]) for o in outputs}
        loss = read_f32(by_name["loss"])[0]
        err = close(loss, ref["loss"], 1e-5, "loss")
        print("loss %.9g torch %.9g relative error %.1e" % (loss, ref["loss"], err))
        worst = 0.0
        for name, expected in sorted(ref["grad_norms"].items()):
            key = "grad." + name
            if key not in by_name:
                fail("no gradient for parameter " + name)
            norm = math.sqrt(sum(float(v) * v for v in read_f32(by_name[key])))
            worst = max(worst, close(norm, expected, 1e-4, "|grad %s|" % name))
        print("gradient norms: %d match, worst relative error %.1e"
              % (len(ref["grad_norms"]), worst))
        return
    if command == "steps":
        losses = []
        with open(target) as f:
            for line in f:
                fields = line.split()
                if fields[:1] == ["step"]:
                    losses.append(float(fields[3]))
        expected = ref["adamw"]["losses_steps_0_1_2"]
        if len(losses) != len(expected):
            fail("%d steps logged, expected %d" % (len(losses), len(expected)))
        worst = max(close(a, e, 1e-4, "loss of step %d" % (i + 1))
                    for i, (a, e) in enumerate(zip(losses, expected)))
        print("adamw losses: %d match, worst relative error %.1e"
              % (len(losses), worst))
        return
    fail("unknown command " + command)


if __name__ == "__main__":
    main(sys.argv)
