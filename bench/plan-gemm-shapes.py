#!/usr/bin/env python3
"""Lists the GEMMs of a program (autopar IR) as bench/gpu-calibrate.cu reads
them: one line per distinct shape, "M N K BATCH  # COUNT x PRECISION".

  plan-gemm-shapes.py PLAN/stage0.air > shapes.txt

MatMul, Linear and Gemm are read as the runtime runs them (runtime/cuda/
CudaOps.cpp): Linear and a MatMul whose right operand has no batch
dimensions are one GEMM over all rows; a batched MatMul is BATCH products.
"""
import re
import sys
from collections import Counter

NAME = r'%(?:"[^"]*"|[A-Za-z0-9_.]+)'
TYPE = r'([a-z0-9]+)\[([^\]]*)\]'


def parse_type(text):
    m = re.match(TYPE, text.strip())
    if not m:
        return None
    dims = [int(d) for d in m.group(2).split(",") if d.strip()] \
        if all(d.strip().lstrip("-").isdigit() for d in m.group(2).split(",")
               if d.strip()) else None
    return (m.group(1), dims) if dims is not None else None


def split_top(text):
    """Splits at the commas outside brackets."""
    parts, depth, cur = [], 0, ""
    for ch in text:
        if ch in "([{<":
            depth += 1
        elif ch in ")]}>":
            depth -= 1
        if ch == "," and depth == 0:
            parts.append(cur.strip())
            cur = ""
        else:
            cur += ch
    if cur.strip():
        parts.append(cur.strip())
    return parts


def prod(xs):
    p = 1
    for x in xs:
        p *= x
    return p


def main():
    if len(sys.argv) != 2:
        sys.exit(__doc__)
    types = {}
    gemms = []
    for line in open(sys.argv[1]):
        line = line.strip()
        g = re.match(r'graph @\S+\((.*)\)\s*\{', line)
        if g:
            for arg in split_top(g.group(1)):
                n, _, t = arg.partition(":")
                ty = parse_type(t)
                if ty:
                    types[n.strip()] = ty
            continue
        p = re.match(r'param (' + NAME + r'): ' + TYPE, line)
        if p:
            ty = parse_type(line.split(": ", 1)[1])
            if ty:
                types[p.group(1)] = ty
            continue
        m = re.match(r'(' + NAME + r'(?:, ' + NAME + r')*) = ([A-Za-z]+)\((.*)$',
                     line)
        if not m:
            continue
        results = [r.strip() for r in re.findall(NAME, m.group(1))]
        op = m.group(2)
        rest = line[line.index(op + "(") + len(op) + 1:]
        body = rest.split(" loc(")[0]
        colon = body.rfind(" : ")
        if colon < 0:
            continue
        for name, t in zip(results, split_top(body[colon + 3:])):
            ty = parse_type(t)
            if ty:
                types[name] = ty
        if op not in ("MatMul", "Linear", "Gemm"):
            continue
        depth, end = 1, 0
        for i, ch in enumerate(rest):
            depth += ch == "("
            depth -= ch == ")"
            if depth == 0:
                end = i
                break
        operands = split_top(rest[:end])
        attrs = rest[end:colon]
        a, b = (types.get(o) for o in operands[:2])
        if not a or not b:
            continue
        prec, x, w = a[0], a[1], b[1]
        if op == "Linear":
            gemms.append((prod(x[:-1]), w[1], w[0], 1, prec))
        elif op == "Gemm":
            ta = re.search(r'transA = 1', attrs) is not None
            tb = re.search(r'transB = 1', attrs) is not None
            m_, k = (x[1], x[0]) if ta else (x[0], x[1])
            n = w[0] if tb else w[1]
            gemms.append((m_, n, k, 1, prec))
        else:
            x = [1] + x if len(x) == 1 else x
            w = w + [1] if len(w) == 1 else w
            if len(w) == 2:
                gemms.append((prod(x[:-1]), w[-1], x[-1], 1, prec))
            else:
                batch = max(prod(x[:-2]), prod(w[:-2]))
                gemms.append((x[-2], w[-1], x[-1], batch, prec))
    for (m_, n, k, batch, prec), count in sorted(Counter(gemms).items()):
        print("%d %d %d %d  # %d x %s" % (m_, n, k, batch, count, prec))


if __name__ == "__main__":
    main()
