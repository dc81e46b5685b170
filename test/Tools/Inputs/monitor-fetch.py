#!/usr/bin/env python3
"""GET http://127.0.0.1:PORT/PATH from an `autopar monitor --port-file FILE`
once FILE exists (at most TIMEOUT seconds), printing the body.

Usage: monitor-fetch.py PORT_FILE PATH [TIMEOUT]
"""
import os
import sys
import time
import urllib.request

port_file, path = sys.argv[1], sys.argv[2]
timeout = float(sys.argv[3]) if len(sys.argv) > 3 else 60
deadline = time.monotonic() + timeout
while not os.path.exists(port_file):
    if time.monotonic() > deadline:
        sys.exit("monitor-fetch: no %s after %g s" % (port_file, timeout))
    time.sleep(0.05)
port = int(open(port_file).read())
url = "http://127.0.0.1:%d/%s" % (port, path.lstrip("/"))
with urllib.request.urlopen(url, timeout=timeout) as response:
    sys.stdout.write(response.read().decode("utf-8"))
