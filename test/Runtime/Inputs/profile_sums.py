"""Checks an autopar-run --profile printout: each table sorted by time and
the kind and op tables summing to the time in nodes of the header (within
the printed rounding)."""
import re
import sys

text = open(sys.argv[1]).read()
header = re.search(r"ms per step .*?, ([0-9.]+) ms in ([0-9]+) nodes", text)
in_nodes = float(header.group(1))
tables = re.split(r"^(by kind of kernel|by op|heaviest nodes):$", text,
                  flags=re.M)
names = {"by kind of kernel": "kind", "by op": "op",
         "heaviest nodes": "heaviest nodes"}
for title, body in zip(tables[1::2], tables[2::2]):
    rows = [line for line in body.splitlines()
            if line.startswith("  ") and "ms/step" not in line]
    ms = [float(line[42:].split()[0]) for line in rows]
    ordered = ms == sorted(ms, reverse=True)
    name = names[title]
    if name == "heaviest nodes":
        print("%s: %d, %s" % (name, len(rows),
                              "sorted" if ordered else "not sorted"))
        continue
    total = sum(ms)
    sums = abs(total - in_nodes) <= 0.0005 * len(rows) + 0.0005
    print("%s: %s, %s" % (name, "sorted" if ordered else "not sorted",
                          "sums to the nodes' time" if sums else
                          "sums to %.3f, not %.3f" % (total, in_nodes)))
