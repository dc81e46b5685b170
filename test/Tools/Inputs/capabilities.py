"""Checks autopar's choices against ir/BackendCapabilities.def.

  capabilities.py DEF BACKEND PLAN_OUTPUT [PLAN_DIR...]

PLAN_OUTPUT is what `autopar ... --top K` printed: every configuration on a
`plan:` or `#k` line must make only choices (`attention=flash`,
`offload=cpu`, ...) that the table marks as run by BACKEND (cpu or cuda).
Without the vocabulary-parallel kernels, no program in a PLAN_DIR may hold
a Gather or cross-entropy split over a mesh axis. Prints what it checked;
exits 1 naming the first choice the backend lacks.
"""
import glob
import os
import re
import sys


def read_table(path):
    text = open(path).read()
    rows = re.findall(r'CAPABILITY\((\w+),\s*"([^"]*)",\s*([012]),\s*([012]),',
                      text)
    table = {}
    # What the search may choose: a kernel that runs as priced (1); 0 has
    # no kernel, 2 runs slower than priced.
    for name, choice, cpu, cuda in rows:
        table[name] = (choice, {"cpu": cpu == "1", "cuda": cuda == "1"})
    if len(table) != text.count("\nCAPABILITY("):
        sys.exit("capabilities.py: a CAPABILITY row did not parse")
    return table


def main(argv):
    if len(argv) < 4:
        sys.exit(__doc__)
    table = read_table(argv[1])
    backend = argv[2]
    lacking = {}
    for name, (choice, runs) in table.items():
        if runs[backend] or "=" not in choice:
            continue
        key, values = choice.split("=", 1)
        for value in values.split("|"):
            lacking[key + "=" + value] = name
    configs = re.findall(r"(?:plan:|#\d+ [^:]*:) (tp=[^ ]+)",
                         open(argv[3]).read())
    if not configs:
        sys.exit("no configurations in " + argv[3])
    for config in configs:
        for choice in config.split(","):
            if choice in lacking:
                sys.exit("%s: the %s backend has no %s (%s)" %
                         (config, backend, lacking[choice], choice))
    programs = 0
    if not table["VocabParallel"][1][backend]:
        for folder in argv[4:]:
            for path in sorted(glob.glob(os.path.join(folder, "stage*.air"))):
                programs += 1
                for line in open(path):
                    if re.search(r"= (Gather|GatherGrad|CrossEntropyLoss"
                                 r"|CrossEntropyLossGrad)\(.*mesh_axis", line):
                        sys.exit("%s: a vocabulary-parallel op, which the %s "
                                 "backend lacks:\n%s" % (path, backend, line))
    print("%d configurations and %d programs: every choice runs on the %s "
          "backend" % (len(configs), programs, backend))


if __name__ == "__main__":
    main(sys.argv)
