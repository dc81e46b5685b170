#!/usr/bin/env python3
"""Raw little-endian tensors for the runtime tests, without numpy.

  tensors.py encode TYPE FILE V...     writes the values V as TYPE (f32, i32, i64)
  tensors.py decode TYPE FILE          prints the values, one per line (%.6g)
  tensors.py ids REF.json FILE         writes REF.json's input_ids as i64
  tensors.py compare OUT.bin REF.f32   compares f32 outputs with a reference:
      passes when max |out - ref| <= 1e-4 * max |ref| and prints the figures
"""

import array
import json
import sys

CODES = {"f32": "f", "i32": "i", "i64": "q"}


def read(code, path):
    values = array.array(code)
    with open(path, "rb") as f:
        values.frombytes(f.read())
    if sys.byteorder != "little":
        values.byteswap()
    return values


def write(code, path, values):
    values = array.array(code, values)
    if sys.byteorder != "little":
        values.byteswap()
    with open(path, "wb") as f:
        f.write(values.tobytes())


def main(argv):
    command = argv[1]
    if command == "encode":
        code = CODES[argv[2]]
        cast = float if code == "f" else int
        write(code, argv[3], [cast(v) for v in argv[4:]])
    elif command == "decode":
        for v in read(CODES[argv[2]], argv[3]):
            print("%.6g" % v)
    elif command == "ids":
        with open(argv[2]) as f:
            ids = json.load(f)["input_ids"]
        write("q", argv[3], [i for row in ids for i in row])
    elif command == "compare":
        out, ref = read("f", argv[2]), read("f", argv[3])
        if len(out) != len(ref):
            print("mismatch: %d values, the reference has %d" %
                  (len(out), len(ref)))
            return 1
        diff = max(abs(a - b) for a, b in zip(out, ref))
        scale = max(abs(b) for b in ref)
        ok = diff <= 1e-4 * scale
        print("%s: max |diff| %.3g, max |logit| %.3g, ratio %.3g %s 1e-4" %
              ("match" if ok else "mismatch", diff, scale, diff / scale,
               "<=" if ok else ">"))
        return 0 if ok else 1
    else:
        print(__doc__, file=sys.stderr)
        return 2
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
