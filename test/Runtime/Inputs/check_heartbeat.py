"""Checks that a frozen rank was reported in time.

Usage: check_heartbeat.py METRICS.jsonl SIGNALLED.txt PERIOD_S

SIGNALLED.txt holds signal_rank.py's `signalled rank R at T`. Prints
`rank R reported lost after D s (within 2 x PERIOD_S)` when the first
heartbeat_lost event of METRICS names rank R and was written at most
2 x PERIOD_S seconds after T; otherwise says what is wrong and exits 1.
"""

import json
import sys


def main():
    metrics, signalled, period = sys.argv[1], sys.argv[2], float(sys.argv[3])
    words = open(signalled).read().split()
    rank, at = int(words[2]), float(words[4])
    events = []
    for line in open(metrics):
        try:
            record = json.loads(line)
        except ValueError:
            continue
        if record.get("event") == "heartbeat_lost":
            events.append(record)
    if not events:
        print("no heartbeat_lost event")
        return 1
    first = min(events, key=lambda e: e["time"])
    delay = first["time"] - at
    if first["rank"] != rank:
        print(f"the first lost rank is {first['rank']}, not {rank}")
        return 1
    if delay > 2 * period:
        print(f"rank {rank} reported lost after {delay:.2f} s, more than "
              f"2 x {period:g} s")
        return 1
    others = [e for e in events if e["rank"] != rank]
    if others:
        print(f"other ranks reported lost too: {others}")
        return 1
    print(f"rank {rank} reported lost after {delay:.2f} s (within 2 x "
          f"{period:g} s)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
