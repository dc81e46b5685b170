#!/usr/bin/env python3
"""Waits until FILE has at least LINES complete lines (at most TIMEOUT
seconds; exits 1 then).

Usage: monitor-wait.py FILE LINES [TIMEOUT]
"""
import sys
import time

path, lines = sys.argv[1], int(sys.argv[2])
timeout = float(sys.argv[3]) if len(sys.argv) > 3 else 120
deadline = time.monotonic() + timeout
while True:
    try:
        with open(path, "rb") as f:
            if f.read().count(b"\n") >= lines:
                break
    except FileNotFoundError:
        pass
    if time.monotonic() > deadline:
        sys.exit("monitor-wait: %s has fewer than %d lines after %g s" %
                 (path, lines, timeout))
    time.sleep(0.05)
