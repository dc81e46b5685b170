"""Checks autopar-run's metrics (docs/Operations.md).

check METRICS.jsonl STEPS.log RANKS
    Every step of STEPS.log (autopar-run's `step N loss X ...` lines) has
    one step record per rank in METRICS, in rank order, whose loss is the
    line's (to the 7 digits records keep), whose phase times add up to at
    most its step time, and whose timeline spans are ordered and within the
    step. Prints one summary line per rank: which phases its timeline has,
    the collectives its sent_bytes name, and whether it waited (idle_s > 0
    in every step).

scrape STDERR_FILE [TIMEOUT_S]
    Waits for autopar-run's `serving metrics on http://HOST:PORT/metrics`
    note in STDERR_FILE, then fetches http://127.0.0.1:PORT/metrics until it
    reports a step, and prints the text.
"""

import json
import re
import sys
import time
import urllib.request


def check(metrics, log, ranks):
    losses = {}
    for line in open(log):
        m = re.match(r"step (\d+) loss (\S+)", line)
        if m:
            losses[int(m.group(1))] = float(m.group(2))
    records = [json.loads(l) for l in open(metrics) if l.strip()]
    steps = [r for r in records if r["kind"] == "step"]
    problems = []
    by_step = {}
    for r in steps:
        by_step.setdefault(r["step"], []).append(r)
    if sorted(by_step) != sorted(losses):
        problems.append(f"steps {sorted(by_step)} != logged {sorted(losses)}")
    summary = {}
    for step, rs in sorted(by_step.items()):
        if [r["rank"] for r in rs] != list(range(ranks)):
            problems.append(f"step {step}: ranks {[r['rank'] for r in rs]}")
        for r in rs:
            if abs(r["loss"] - losses.get(step, 0)) > 1e-6 * max(1, abs(r["loss"])):
                problems.append(f"step {step} rank {r['rank']}: loss {r['loss']}")
            parts = sum(r[k] for k in ("forward_s", "backward_s", "comm_s",
                                       "optimizer_s", "idle_s"))
            if abs(parts - r["step_s"]) > 1e-5 + 1e-3 * r["step_s"]:
                problems.append(f"step {step} rank {r['rank']}: parts {parts} "
                                f"!= step_s {r['step_s']}")
            last = 0
            for phase, mb, start, end in r["timeline"]:
                if start + 1e-3 < last or end < start or end > r["step_s"] * 1e3 + 1e-3:
                    problems.append(f"step {step} rank {r['rank']}: span "
                                    f"{phase} {start}-{end}")
                last = end
            s = summary.setdefault(r["rank"], {"phases": set(), "sent": set(),
                                               "waited": True})
            s["phases"] |= {p for p, _, _, _ in r["timeline"]}
            s["sent"] |= set(r["sent_bytes"])
            s["waited"] &= r["idle_s"] > 0
            for key in ("host", "device_bytes", "host_bytes", "lr",
                        "tokens_per_s", "time"):
                if key not in r:
                    problems.append(f"step {step} rank {r['rank']}: no {key}")
    for p in problems[:10]:
        print("problem:", p)
    for rank, s in sorted(summary.items()):
        print(f"rank {rank}: phases {''.join(sorted(s['phases']))} sent "
              f"{' '.join(sorted(s['sent'])) or '-'} waited "
              f"{'yes' if s['waited'] else 'no'}")
    print(f"{len(by_step)} steps x {ranks} ranks: "
          f"{'ok' if not problems else 'FAILED'}")
    return 1 if problems else 0


def scrape(stderr_file, timeout):
    deadline = time.time() + timeout
    port = None
    while time.time() < deadline and port is None:
        try:
            m = re.search(r"serving metrics on http://[^:]+:(\d+)/metrics",
                          open(stderr_file).read())
            port = m and m.group(1)
        except OSError:
            pass
        time.sleep(0.05)
    if port is None:
        print("no 'serving metrics' note")
        return 1
    while time.time() < deadline:
        text = urllib.request.urlopen(
            f"http://127.0.0.1:{port}/metrics", timeout=10).read().decode()
        if "autopar_step " in text:
            print(text, end="")
            return 0
        time.sleep(0.1)
    print("no step was reported")
    return 1


if __name__ == "__main__":
    if sys.argv[1] == "check":
        sys.exit(check(sys.argv[2], sys.argv[3], int(sys.argv[4])))
    sys.exit(scrape(sys.argv[2], float(sys.argv[3]) if len(sys.argv) > 3 else 60))
