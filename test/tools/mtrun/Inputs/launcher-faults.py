#!/usr/bin/env python3
"""Faults around a multi-rank `mtrun --nodes N` job, checked from outside.

  launcher-faults.py FAULT METRICS -- mtrun PLAN --nodes N ... --metrics METRICS

Starts the command, waits until METRICS holds a step (the ranks train), then:

  term     sends SIGTERM to the launcher; every rank must be gone within 15 s
  int      sends SIGINT (Ctrl-C) to the launcher; every rank must be gone within 15 s
  kill     sends SIGKILL to the launcher; every rank must be gone within 15 s (no orphan)
  stop     sends SIGSTOP to the launcher's last rank; the job must end within 60 s
  stop:K   sends SIGSTOP to rank K; the job must end within 60 s
  sockets  checks that every TCP socket of the ranks (the store's listener, Gloo's pairs) is
           bound to 127.0.0.1 and that only the store listens (Gloo's pairs listen only while
           they connect), connects as a stray client to every other port of the ranks (each
           must refuse it), then to the rendezvous store (MASTER_PORT), writing garbage; the
           job must still succeed

Prints the job's stderr, then one line saying what was checked. Exits non-zero when a
check fails."""
import os
import signal
import socket
import subprocess
import sys
import time


def children(pid):
    with open(f"/proc/{pid}/task/{pid}/children") as f:
        return [int(p) for p in f.read().split()]


def alive(pid):
    """Running or stopped, not a zombie waiting for its reaper."""
    try:
        with open(f"/proc/{pid}/stat") as f:
            return f.read().rsplit(")", 1)[1].split()[0] != "Z"
    except FileNotFoundError:
        return False


def socket_inodes(pids):
    """The inodes of the sockets that the processes hold."""
    inodes = set()
    for pid in pids:
        try:
            fds = os.listdir(f"/proc/{pid}/fd")
        except OSError:
            continue
        for fd in fds:
            try:
                target = os.readlink(f"/proc/{pid}/fd/{fd}")
            except OSError:
                continue
            if target.startswith("socket:["):
                inodes.add(target[8:-1])
    return inodes


def tcp_sockets():
    """(local address, port, listening, inode) of every TCP socket of the host."""
    found = []
    for table in ("/proc/net/tcp", "/proc/net/tcp6"):
        with open(table) as f:
            for line in f.readlines()[1:]:
                fields = line.split()
                local, state, inode = fields[1], fields[3], fields[9]
                address, port = local.split(":")
                found.append((address, int(port, 16), state == "0A", inode))
    return found


def socket_addresses(pids):
    """(local address, port, listening) of the TCP sockets that the processes hold."""
    inodes = socket_inodes(pids)
    return [(a, p, listening) for a, p, listening, inode in tcp_sockets() if inode in inodes]


def listened_elsewhere(pids, port):
    """Whether a process other than `pids` listens on `port`: one may have bound a port the
    ranks let go since they were listed (another test's job, under lit's parallel runs), and
    a stray's connection there says nothing of the ranks."""
    inodes = socket_inodes(pids)
    return any(p == port and listening and inode not in inodes
               for _, p, listening, inode in tcp_sockets())


def master_port(pid):
    with open(f"/proc/{pid}/environ", "rb") as f:
        for entry in f.read().split(b"\0"):
            if entry.startswith(b"MASTER_PORT="):
                return int(entry[len(b"MASTER_PORT="):])
    sys.exit("the rank has no MASTER_PORT")


def main():
    fault, metrics = sys.argv[1], sys.argv[2]
    command = sys.argv[sys.argv.index("--") + 1:]
    job = subprocess.Popen(command, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
    deadline = time.monotonic() + 120
    while not (os.path.exists(metrics) and os.path.getsize(metrics) > 0):
        if job.poll() is not None or time.monotonic() > deadline:
            sys.exit(f"the job ended or stalled before its first step: {job.stderr.read()}")
        time.sleep(0.05)
    ranks = children(job.pid)
    checked = ""
    if fault in ("term", "int", "kill"):
        job.send_signal({"term": signal.SIGTERM, "int": signal.SIGINT, "kill": signal.SIGKILL}[fault])
        end = time.monotonic() + 15
        while any(alive(r) for r in ranks) and time.monotonic() < end:
            time.sleep(0.05)
        left = [r for r in ranks if alive(r)]
        for r in left:
            os.kill(r, signal.SIGKILL)
        if left:
            job.kill()
            sys.exit(f"{len(left)} of {len(ranks)} ranks still ran 15 s after the launcher's {fault}")
        checked = f"all {len(ranks)} ranks gone after the launcher's {fault}"
    elif fault == "stop" or fault.startswith("stop:"):
        stopped = int(fault[5:]) if fault.startswith("stop:") else len(ranks) - 1
        os.kill(ranks[stopped], signal.SIGSTOP)
        checked = f"rank {stopped} stopped"
    elif fault == "sockets":
        sockets = socket_addresses(ranks)
        if not any(listening for _, _, listening in sockets):
            sys.exit("the ranks listen on no TCP socket")
        outside = [s for s in sockets if s[0] != "0100007F"]
        if outside:
            sys.exit(f"the ranks have sockets beyond loopback: {outside}")
        port = master_port(ranks[0])
        listening = sorted({p for _, p, is_listening in sockets if is_listening})
        if listening != [port]:
            sys.exit(f"the ranks listen on {listening}, not only on the store's port {port}")
        others = sorted({p for _, p, _ in sockets if p != port})
        for other in others:
            try:
                with socket.create_connection(("127.0.0.1", other), timeout=5) as s:
                    s.sendall(os.urandom(4096))
                    if not listened_elsewhere(ranks, other):
                        sys.exit(f"a stray connected to port {other} of the ranks")
            except ConnectionRefusedError:
                pass
        for garbage in (b"GET / HTTP/1.1\r\n\r\n", b"\xff\xff\xff\xff", os.urandom(4096), b""):
            with socket.create_connection(("127.0.0.1", port)) as s:
                s.sendall(garbage)
        checked = (f"every socket of the ranks on 127.0.0.1; only the store listens; "
                   f"{len(others)} other ports refused a stray; garbage sent to the store")
    else:
        sys.exit(f"unknown fault {fault}")
    try:
        _, err = job.communicate(timeout=60)
    except subprocess.TimeoutExpired:
        job.kill()
        sys.exit("the launcher did not end within 60 s")
    sys.stdout.write(err)
    print(f"{checked}; exit status {job.returncode}")


if __name__ == "__main__":
    main()
