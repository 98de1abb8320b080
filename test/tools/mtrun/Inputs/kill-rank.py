#!/usr/bin/env python3
"""Kills one rank of a multi-rank mtrun job and checks that the job ends in time.

  kill-rank.py METRICS RANK -- mtrun PLAN --nodes 4 ... --metrics METRICS

Starts the command, waits until METRICS holds a step (training is under way), kills the
RANK-th child of the launcher with SIGKILL, and waits for the launcher. Fails if the job
does not end within 60 s or ends with status 0. Prints the job's stderr, then
`exit status N within 60 s`."""
import os
import signal
import subprocess
import sys
import time


def children(pid):
    with open(f"/proc/{pid}/task/{pid}/children") as f:
        return [int(p) for p in f.read().split()]


def main():
    metrics, rank = sys.argv[1], int(sys.argv[2])
    command = sys.argv[sys.argv.index("--") + 1:]
    job = subprocess.Popen(command, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
    deadline = time.monotonic() + 120
    while not (os.path.exists(metrics) and os.path.getsize(metrics) > 0):
        if job.poll() is not None or time.monotonic() > deadline:
            sys.exit(f"the job ended or stalled before its first step: {job.stderr.read()}")
        time.sleep(0.05)
    ranks = children(job.pid)
    if len(ranks) <= rank:
        sys.exit(f"the launcher has {len(ranks)} ranks")
    os.kill(ranks[rank], signal.SIGKILL)
    killed = time.monotonic()
    try:
        _, err = job.communicate(timeout=60)
    except subprocess.TimeoutExpired:
        job.kill()
        sys.exit("the job did not end within 60 s of the kill")
    sys.stdout.write(err)
    elapsed = time.monotonic() - killed
    if job.returncode == 0:
        sys.exit("the job succeeded although a rank was killed")
    print(f"exit status {job.returncode} within 60 s" if elapsed < 60 else f"took {elapsed:.0f} s")


if __name__ == "__main__":
    main()
