#!/usr/bin/env python3
"""Helpers of the checkpoint tests (test/Runtime/checkpoint*.test).

  checkpoint.py tokens FILE            writes 256 little-endian int32 tokens
                                       below 50
  checkpoint.py same REF LOG...        checks that the `step N loss X` lines
      of each LOG have consecutive steps and the very loss text of REF's step
      N (%.9g round-trips an f32, so equal text is equal bits); prints
      "LOG: steps A-B match" per LOG (its file name)
  checkpoint.py signal SIG STEP LOG CMD...
      runs CMD with standard output to LOG and errors to LOG.err, sends SIG
      (TERM or KILL) once LOG shows step STEP, waits for the end and prints
      "exit N" or "killed by SIGNAME"; every wait has a deadline
  checkpoint.py flip DIR TENSOR        flips one byte of TENSOR's data in
                                       DIR/rank0.bin (offset from rank0.json)
  checkpoint.py truncate FILE BYTES    cuts BYTES bytes off the end of FILE
  checkpoint.py drop DIR TENSOR        removes TENSOR's entry from
                                       DIR/rank0.json
  checkpoint.py reverse-params IN OUT  writes program IN with its `param`
                                       lines in reverse order
"""

import json
import os
import re
import signal
import struct
import subprocess
import sys
import time

STEP = re.compile(r"^step (\d+) loss (\S+) ")
DEADLINE_S = 120


def losses(path):
    steps = []
    with open(path) as f:
        for line in f:
            m = STEP.match(line)
            if m:
                steps.append((int(m.group(1)), m.group(2)))
    return steps


def same(ref_path, logs):
    ref = dict(losses(ref_path))
    ok = True
    for path in logs:
        steps = losses(path)
        name = os.path.basename(path)
        if not steps:
            print(f"{name}: no steps")
            ok = False
            continue
        for i, (step, loss) in enumerate(steps):
            if i and step != steps[i - 1][0] + 1:
                print(f"{name}: step {step} follows step {steps[i - 1][0]}")
                ok = False
            if ref.get(step) != loss:
                print(f"{name}: step {step} loss {loss}, "
                      f"{os.path.basename(ref_path)} has {ref.get(step)}")
                ok = False
        print(f"{name}: steps {steps[0][0]}-{steps[-1][0]} match"
              if ok else f"{name}: MISMATCH")
    return 0 if ok else 1


def run_and_signal(sig_name, step, log, cmd):
    sig = {"TERM": signal.SIGTERM, "KILL": signal.SIGKILL}[sig_name]
    with open(log, "w") as out, open(log + ".err", "w") as err:
        child = subprocess.Popen(cmd, stdout=out, stderr=err)

    def stop(*_):
        child.kill()
        sys.exit(1)

    # If this helper is timed out, the child goes with it.
    signal.signal(signal.SIGTERM, stop)
    wanted = re.compile(rf"^step {step} loss ", re.M)
    start = time.monotonic()
    while True:
        with open(log) as f:
            if wanted.search(f.read()):
                break
        if child.poll() is not None:
            print(f"ended before step {step}: exit {child.returncode}")
            return 1
        if time.monotonic() - start > DEADLINE_S:
            child.kill()
            print(f"no step {step} within {DEADLINE_S} s")
            return 1
        time.sleep(0.005)
    child.send_signal(sig)
    try:
        code = child.wait(timeout=DEADLINE_S)
    except subprocess.TimeoutExpired:
        child.kill()
        print(f"still running {DEADLINE_S} s after SIG{sig_name}")
        return 1
    if code < 0:
        print(f"killed by {signal.Signals(-code).name}")
    else:
        print(f"exit {code}")
    return 0


def flip(folder, tensor):
    with open(os.path.join(folder, "rank0.json")) as f:
        index = json.load(f)
    entry = next(t for t in index["tensors"] if t["name"] == tensor)
    with open(os.path.join(folder, "rank0.bin"), "r+b") as f:
        f.seek(entry["offset"] + entry["length"] // 2)
        byte = f.read(1)
        f.seek(-1, os.SEEK_CUR)
        f.write(bytes([byte[0] ^ 0x10]))
    return 0


def drop(folder, tensor):
    path = os.path.join(folder, "rank0.json")
    with open(path) as f:
        index = json.load(f)
    index["tensors"] = [t for t in index["tensors"] if t["name"] != tensor]
    with open(path, "w") as f:
        json.dump(index, f, indent=2)
    return 0


def reverse_params(src, dst):
    with open(src) as f:
        lines = f.readlines()
    where = [i for i, line in enumerate(lines)
             if line.lstrip().startswith("param ")]
    params = [lines[i] for i in where]
    for i, line in zip(where, reversed(params)):
        lines[i] = line
    with open(dst, "w") as f:
        f.writelines(lines)
    return 0


def main(argv):
    command = argv[1]
    if command == "tokens":
        with open(argv[2], "wb") as f:
            f.write(struct.pack("<256i", *[(i * 37 + 11) % 50
                                           for i in range(256)]))
        return 0
    if command == "same":
        return same(argv[2], argv[3:])
    if command == "signal":
        return run_and_signal(argv[2], int(argv[3]), argv[4], argv[5:])
    if command == "flip":
        return flip(argv[2], argv[3])
    if command == "truncate":
        size = os.path.getsize(argv[2])
        os.truncate(argv[2], size - int(argv[3]))
        return 0
    if command == "drop":
        return drop(argv[2], argv[3])
    if command == "reverse-params":
        return reverse_params(argv[2], argv[3])
    print(__doc__)
    return 2


if __name__ == "__main__":
    sys.exit(main(sys.argv))
