#!/usr/bin/env python3
"""Starts `mtrun serve --nodes 2`, sends it real HTTP requests, stops or breaks the job.

    serve-ranks-client.py MODE MTRUN PLAN CKPT WORKDIR GREEDY_IDS SAMPLE_IDS [SERVE FLAGS...]

GREEDY_IDS and SAMPLE_IDS are `mtrun generate --ids`'s output on one rank for "hello" (20 new
tokens, greedy; 12 new tokens at temperature 1 with seed 7). MODE:

  requests     greedy and seeded requests in both APIs compared with mtrun generate, refusals
               between them (the other ranks never see those), then SIGTERM to the launcher
               during a long generation: the request gets 503, every rank ends, status 0;
  term-rank    SIGTERM to rank 1 alone while the server is idle: rank 0 stops the job, status 0;
  kill-rank N  SIGKILL to rank N while the server is idle: the job ends with an error.

Each check prints one line for FileCheck. The job always ends, even when a check fails (SIGKILL
to the launcher after 60 s), and how it ended is printed: its exit status, whether it ended
within the limit, whether any rank outlived it, and the log lines that say why."""
import json
import os
import signal
import subprocess
import sys
import threading
import time
import urllib.error
import urllib.request


def children(pid):
    try:
        with open(f"/proc/{pid}/task/{pid}/children") as f:
            return [int(p) for p in f.read().split()]
    except FileNotFoundError:
        return []


def rank_of(pid):
    with open(f"/proc/{pid}/environ", "rb") as f:
        for entry in f.read().split(b"\0"):
            if entry.startswith(b"RANK="):
                return int(entry[5:])
    return -1


def alive(pid):
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    # A zombie has ended: its parent (the launcher) has not reaped it yet.
    try:
        with open(f"/proc/{pid}/stat") as f:
            return f.read().split(")")[-1].split()[0] != "Z"
    except FileNotFoundError:
        return False


class Job:
    """`mtrun serve ... --nodes 2` on a free port, one generation request at a time."""

    def __init__(self, mtrun, plan, ckpt, workdir, name, flags):
        self.port_file = os.path.join(workdir, name + ".port")
        self.log_path = os.path.join(workdir, name + ".log")
        if os.path.exists(self.port_file):
            os.remove(self.port_file)
        self.log = open(self.log_path, "w")
        self.process = subprocess.Popen(
            [mtrun, "serve", plan, "--load", ckpt, "--port", "0", "--port-file", self.port_file,
             "--max-concurrency", "1", *flags],
            stdout=self.log, stderr=subprocess.STDOUT)
        deadline = time.time() + 120
        while not os.path.exists(self.port_file):
            if self.process.poll() is not None or time.time() > deadline:
                raise RuntimeError("the server did not start: " + open(self.log_path).read())
            time.sleep(0.05)
        self.port = int(open(self.port_file).read())
        self.ranks = sorted(children(self.process.pid), key=rank_of)

    def end(self, limit):
        """Waits for the launcher at most `limit` s (then kills it) and prints how it ended."""
        start = time.monotonic()
        try:
            code = self.process.wait(timeout=limit)
        except subprocess.TimeoutExpired:
            self.process.kill()
            self.process.wait()
            code = "hung (killed)"
        took = time.monotonic() - start
        print(f"the job ended {took:.1f} s after the signal or the kill", file=sys.stderr)
        self.log.close()
        print("job exit:", code)
        print(f"ended within {limit} s:", took < limit)
        print("ranks left:", [r for r in self.ranks if alive(r)])
        return took

    def log_lines(self, *needles):
        """The lines of the log holding one of `needles`, in order."""
        return [line for line in open(self.log_path).read().splitlines()
                if any(n in line for n in needles)]

    def send(self, method, path, body=None, raw=None):
        data = raw if raw is not None else (json.dumps(body).encode() if body is not None else None)
        request = urllib.request.Request(f"http://127.0.0.1:{self.port}{path}", data=data,
                                         method=method,
                                         headers={"Content-Type": "application/json"})
        try:
            with urllib.request.urlopen(request, timeout=120) as response:
                return response.status, response.read().decode()
        except urllib.error.HTTPError as error:
            return error.code, error.read().decode()

    def json(self, method, path, body):
        status, text = self.send(method, path, body)
        if status != 200:
            raise RuntimeError(f"{method} {path} {body}: {status} {text}")
        return json.loads(text)

    def show(self, name, method, path, body=None, **kwargs):
        status, text = self.send(method, path, body, **kwargs)
        print(f"{name}: {status} {text}")


def greedy_check(job, greedy_ids, name):
    answer = job.json("PUT", "/api", {"prompts": ["hello"], "tokens_to_generate": 20,
                                      "temperature": 0})
    print(f"{name}: greedy /api tokens are mtrun generate's:", answer["tokens"][0] == greedy_ids)
    return answer


def requests(job, greedy_ids, sample_ids):
    print("ranks:", len(job.ranks))
    megatron = greedy_check(job, greedy_ids, "first")
    openai = job.json("POST", "/v1/completions", {"prompt": ["hello", "hi"], "max_tokens": 20,
                                                  "temperature": 0})
    print("greedy /v1/completions text is /api's:",
          openai["choices"][0]["text"] == megatron["text"][0][5:], len(openai["choices"]))
    sampled = job.json("PUT", "/api", {"prompts": ["hello"], "tokens_to_generate": 12,
                                       "temperature": 1, "random_seed": 7})
    print("seeded /api tokens are mtrun generate's:", sampled["tokens"][0] == sample_ids)
    body = {"prompt": "hello", "max_tokens": 12, "temperature": 1, "seed": 7}
    first, second = (job.json("POST", "/v1/completions", body) for _ in range(2))
    print("seeded /v1/completions repeats:", first["choices"] == second["choices"],
          first["choices"][0]["text"] == sampled["text"][0][5:])
    scored = job.json("PUT", "/api", {"prompts": ["hello"], "tokens_to_generate": 0,
                                      "logprobs": True})
    print("logprobs:", scored["tokens"][0] == [104, 101, 108, 108, 111],
          len(scored["logprobs"][0]))
    # Refusals: by rank 0 alone (the body), or by every rank before any token (the window).
    job.show("bad JSON", "PUT", "/api", raw=b'{"prompts": ["hello"]')
    job.show("unknown openai", "POST", "/v1/completions", {"prompt": "hello", "temprature": 1})
    job.show("window", "PUT", "/api", {"prompts": ["hello"], "tokens_to_generate": 60})
    job.show("wrong method", "GET", "/api")
    greedy_check(job, greedy_ids, "after the refusals")
    job.show("health", "GET", "/health")


def interrupted_request(job):
    """SIGTERM to the launcher while a long request computes: 503, and the job ends."""
    result = {}
    long_body = {"prompts": ["hello"] * 16, "tokens_to_generate": 59, "temperature": 0}
    worker = threading.Thread(target=lambda: result.update(long=job.send("PUT", "/api", long_body)))
    worker.start()
    while json.loads(job.send("GET", "/health")[1])["active_requests"] == 0:
        time.sleep(0.001)
    time.sleep(0.3)
    job.process.send_signal(signal.SIGTERM)
    worker.join(timeout=60)
    print("interrupted request:", *result.get("long", ("none",)))


def main():
    mode = sys.argv[1]
    mtrun, plan, ckpt, workdir, greedy_file, sample_file = sys.argv[2:8]
    flags = sys.argv[8:]
    victim = None
    if mode == "kill-rank":
        victim, flags = int(flags[0]), flags[1:]
    greedy_ids = [int(t) for t in open(greedy_file).read().split()]
    sample_ids = [int(t) for t in open(sample_file).read().split()]

    job = Job(mtrun, plan, ckpt, workdir, f"{mode}-{os.path.basename(plan.rstrip('/'))}", flags)
    ended = False
    try:
        if mode == "requests":
            requests(job, greedy_ids, sample_ids)
            interrupted_request(job)
            job.end(10)
            ended = True
            print("log:", *job.log_lines("stopped", "error"), sep="\n")
        elif mode == "term-rank":
            greedy_check(job, greedy_ids, "before")
            os.kill(job.ranks[1], signal.SIGTERM)
            job.end(10)
            ended = True
            print("log:", *job.log_lines("stopped", "error"), sep="\n")
        elif mode == "kill-rank":
            greedy_check(job, greedy_ids, "before")
            os.kill(job.ranks[victim], signal.SIGKILL)
            job.end(30)
            ended = True
            print("log:", *job.log_lines("error"), sep="\n")
        else:
            sys.exit(f"unknown mode {mode}")
    finally:
        if not ended:
            job.process.send_signal(signal.SIGTERM)
            job.end(60)


if __name__ == "__main__":
    main()
