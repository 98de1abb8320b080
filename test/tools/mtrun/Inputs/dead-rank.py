#!/usr/bin/env python3
"""Starts the ranks of a 2-rank job by hand, as torchrun would, one of them doomed.

  dead-rank.py -- mtrun generate PLAN --load CKPT ... --nodes 2

Picks a free port and a job token and starts rank 0 with the command as given and rank 1
with its `--load` pointing at a directory that does not exist, so that rank 1 joins the job
and then fails and ends while rank 0 goes on to its first collective. Both must end within
60 s, rank 0 with a non-zero status too. Prints both ranks' stderr (rank 0's first), then
`rank 0: exit status N; rank 1: exit status M; within 60 s`."""
import os
import socket
import subprocess
import sys
import time


def main():
    command = sys.argv[sys.argv.index("--") + 1:]
    doomed = list(command)
    doomed[doomed.index("--load") + 1] = "/nonexistent/checkpoint"
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    env = dict(os.environ, WORLD_SIZE="2", LOCAL_WORLD_SIZE="2", MASTER_ADDR="127.0.0.1",
               MASTER_PORT=str(port), MTC_JOB_TOKEN="0123456789abcdef0123456789abcdef")
    ranks = []
    for rank, argv in enumerate([command, doomed]):
        ranks.append(subprocess.Popen(argv, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE,
                                      text=True, env=dict(env, RANK=str(rank),
                                                          LOCAL_RANK=str(rank))))
    start = time.monotonic()
    errors, statuses = [], []
    for p in ranks:
        try:
            _, err = p.communicate(timeout=max(1, 60 - (time.monotonic() - start)))
        except subprocess.TimeoutExpired:
            for q in ranks:
                q.kill()
            sys.exit("the job did not end within 60 s")
        errors.append(err)
        statuses.append(p.returncode)
    for err in errors:
        sys.stdout.write(err)
    print(f"rank 0: exit status {statuses[0]}; rank 1: exit status {statuses[1]}; within 60 s")


if __name__ == "__main__":
    main()
