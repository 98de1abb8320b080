#!/usr/bin/env python3
"""Truncates a `--data` file while mtrun trains on it.

  truncate-while-training.py DATA METRICS -- mtrun PLAN --data DATA --metrics METRICS ...

Starts the command, waits until METRICS holds a step, truncates DATA to 100 bytes, and waits
for mtrun (60 s at most). Prints its stderr, then `exit status N` or `killed by signal N`
(a mapped file truncated under the reader raised SIGBUS)."""
import os
import subprocess
import sys
import time


def main():
    data, metrics = sys.argv[1], sys.argv[2]
    command = sys.argv[sys.argv.index("--") + 1:]
    job = subprocess.Popen(command, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
    deadline = time.monotonic() + 120
    while not (os.path.exists(metrics) and os.path.getsize(metrics) > 0):
        if job.poll() is not None or time.monotonic() > deadline:
            sys.exit(f"the run ended or stalled before its first step: {job.stderr.read()}")
        time.sleep(0.05)
    os.truncate(data, 100)
    try:
        _, err = job.communicate(timeout=60)
    except subprocess.TimeoutExpired:
        job.kill()
        sys.exit("mtrun did not end within 60 s of the truncation")
    sys.stdout.write(err)
    code = job.returncode
    print(f"exit status {code}" if code >= 0 else f"killed by signal {-code}")


if __name__ == "__main__":
    main()
