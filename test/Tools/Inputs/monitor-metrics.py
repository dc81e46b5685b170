#!/usr/bin/env python3
"""Appends records to a metrics.jsonl as autopar-run --metrics and autopar
launch write them (docs/Operations.md), timed from now.

Usage: monitor-metrics.py FILE WHAT...; WHAT is one of
  start            an attempt starts (4 ranks)
  steps:A-B        steps A..B of 4 ranks: ranks 0 and 1 (stage 0) idle 0.05 s
                   of 0.16 s, ranks 2 and 3 idle 0.01 s
  failure          rank 2 on host n001 failed
  restart          the next attempt resumes from step 2
  finished         the run finished
  stopped          the run was stopped by a signal
  junk             a line that is not a record
  partial          the first part of rank 0's record of step 4, without its
                   newline (a record being written)
  complete         the rest of that record
"""
import json
import sys
import time

path = sys.argv[1]
now = time.time()
attempt = 1


def step_record(step, rank):
    stage = rank // 2
    return {
        "kind": "step", "step": step, "rank": rank,
        "host": "n00%d" % stage, "attempt": attempt, "time": now,
        "step_s": 0.16, "forward_s": 0.05, "backward_s": 0.09,
        "comm_s": 0.01, "optimizer_s": 0.005,
        "idle_s": 0.05 if stage == 0 else 0.01,
        "tokens_per_s": 6000.0 + 100 * step, "loss": 4.5 - 0.25 * step,
        "lr": 0.0003, "device_bytes": 78643200 + 1024 * rank,
        "host_bytes": 385875968,
        "sent_bytes": {"AllReduce": 4194304, "Send": 65536},
        "offload_bytes": {"host": 0, "nvme": 0},
        "timeline": [["F", 0, 0.0, 12.5], ["W", -1, 12.5, 13.0],
                     ["B", 0, 13.0, 40.1], ["C", -1, 40.1, 42.0],
                     ["O", -1, 42.0, 45.0]]}


with open(path, "a") as out:
    def write(record):
        out.write(json.dumps(record) + "\n")

    being_written = json.dumps(step_record(4, 0)) + "\n"

    for what in sys.argv[2:]:
        if what == "start":
            write({"kind": "event", "event": "start", "time": now,
                   "attempt": attempt, "ranks": 4, "from_step": 1})
        elif what.startswith("steps:"):
            first, last = map(int, what[len("steps:"):].split("-"))
            for step in range(first, last + 1):
                for rank in range(4):
                    write(step_record(step, rank))
        elif what == "failure":
            write({"kind": "event", "event": "failure", "time": now,
                   "attempt": attempt, "rank": 2, "host": "n001", "step": 4,
                   "message": "rank 2 (n001): no heartbeat for 3 s",
                   "exit_code": 9})
        elif what == "restart":
            attempt = 2
            write({"kind": "event", "event": "restart", "time": now,
                   "attempt": attempt, "from_step": 2, "lost_s": 1.5,
                   "ranks": 4})
        elif what == "finished":
            write({"kind": "event", "event": "finished", "time": now,
                   "attempt": attempt, "steps": 5, "restarts": 1})
        elif what == "stopped":
            write({"kind": "event", "event": "stopped", "time": now,
                   "attempt": attempt, "steps": 5, "restarts": 1})
        elif what == "junk":
            out.write("not a record\n")
        elif what == "partial":
            out.write(being_written[:40])
        elif what == "complete":
            out.write(being_written[40:])
        else:
            sys.exit("monitor-metrics: unknown " + what)
