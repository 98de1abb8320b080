#!/usr/bin/env python3
"""Starts `mtrun serve`, sends it real HTTP requests, prints what came back, stops it.

    serve-client.py MTRUN PLAN CKPT WORKDIR GREEDY_IDS SAMPLE_IDS LOGITS_NPY

GREEDY_IDS and SAMPLE_IDS are `mtrun generate --ids`'s output for "hello" (20 new tokens,
greedy; 12 new tokens at temperature 1 with seed 7), LOGITS_NPY its --dump-logits of the
greedy run. Each check prints one line for FileCheck: a comparison as `name: True`, a refusal
as `name: STATUS BODY`. The server always stops at the end, even when a check fails, and its
exit status and last log line are printed. The server runs twice: once for the requests,
once to be stopped with SIGINT while it generates. Latencies go to stderr.
"""
import json
import os
import signal
import statistics
import subprocess
import sys
import threading
import time
import urllib.error
import urllib.request

import numpy as np

MAX_REQUEST_BYTES = 4096


class Server:
    """`mtrun serve` on a free port (--port 0 --port-file), one generation request at a time."""

    def __init__(self, mtrun, plan, ckpt, workdir, name, extra_args=()):
        self.port_file = os.path.join(workdir, name + ".port")
        self.log_path = os.path.join(workdir, name + ".log")
        if os.path.exists(self.port_file):
            os.remove(self.port_file)
        self.log = open(self.log_path, "w")
        self.process = subprocess.Popen(
            [mtrun, "serve", plan, "--load", ckpt, "--port", "0", "--port-file", self.port_file,
             "--max-concurrency", "1", "--max-request-bytes", str(MAX_REQUEST_BYTES),
             *extra_args],
            stdout=self.log, stderr=subprocess.STDOUT)
        deadline = time.time() + 120
        while not os.path.exists(self.port_file):
            if self.process.poll() is not None or time.time() > deadline:
                raise RuntimeError("the server did not start: " + open(self.log_path).read())
            time.sleep(0.05)
        self.port = int(open(self.port_file).read())

    def stop(self, sig):
        """Sends `sig` (unless None or ended), waits at most 60 s, and prints how it ended."""
        if sig is not None and self.process.poll() is None:
            self.process.send_signal(sig)
        try:
            code = self.process.wait(timeout=60)
        except subprocess.TimeoutExpired:
            self.process.kill()
            code = "hung (killed)"
        self.log.close()
        lines = open(self.log_path).read().strip().splitlines()
        print("server exit:", code)
        print("server log:", lines[-1] if lines else "")

    def send(self, method, path, body=None, raw=None, chunked=False):
        """(status, text) of one request; `body` is sent as JSON, `raw` as it is."""
        data = raw if raw is not None else (json.dumps(body).encode() if body is not None else None)
        if chunked:
            data = iter([data[i:i + 1000] for i in range(0, len(data), 1000)])
        request = urllib.request.Request(f"http://127.0.0.1:{self.port}{path}", data=data,
                                         method=method,
                                         headers={"Content-Type": "application/json"})
        try:
            with urllib.request.urlopen(request, timeout=120) as response:
                return response.status, response.read().decode()
        except urllib.error.HTTPError as error:
            return error.code, error.read().decode()

    def json(self, method, path, body):
        """The answer of a request that must succeed, as JSON."""
        status, text = self.send(method, path, body)
        if status != 200:
            raise RuntimeError(f"{method} {path} {body}: {status} {text}")
        return json.loads(text)

    def show(self, name, method, path, body=None, **kwargs):
        status, text = self.send(method, path, body, **kwargs)
        print(f"{name}: {status} {text}")


def busy_check(server, long_body, method, path, body):
    """Sends `body` while the long request computes; returns both answers."""
    result = {}
    worker = threading.Thread(
        target=lambda: result.update(long=server.send("PUT", "/api", long_body)))
    worker.start()
    deadline = time.time() + 60
    while json.loads(server.send("GET", "/health")[1])["active_requests"] == 0:
        if time.time() > deadline:
            raise RuntimeError("the long request did not start")
        time.sleep(0.001)
    answer = server.send(method, path, body)
    worker.join()
    return result["long"], answer


def requests(server, greedy_ids, sample_ids, logits):
    hello = [104, 101, 108, 108, 111]
    # Greedy: the tokens of mtrun generate for the same prompt, in both APIs.
    megatron = server.json("PUT", "/api", {"prompts": ["hello"], "tokens_to_generate": 20,
                                           "temperature": 0})
    print("greedy /api tokens are mtrun generate's:", megatron["tokens"][0] == greedy_ids)
    print("greedy /api segments:", len(megatron["segments"][0]) == len(greedy_ids))
    print("greedy /api text starts with the prompt:", megatron["text"][0].startswith("hello"))
    openai = server.json("POST", "/v1/completions", {"prompt": ["hello", "hi"], "max_tokens": 20,
                                                     "temperature": 0, "model": "any"})
    choices = openai["choices"]
    print("greedy /v1/completions text is /api's:", choices[0]["text"] == megatron["text"][0][5:])
    print("completion:", openai["object"], openai["model"], [c["index"] for c in choices],
          choices[0]["finish_reason"], openai["usage"])
    print("ids:", openai["id"].startswith("cmpl-"), isinstance(openai["created"], int))

    # Sampling with a seed: mtrun generate's tokens, the same answer every time.
    sampled = server.json("PUT", "/api", {"prompts": ["hello"], "tokens_to_generate": 12,
                                          "temperature": 1, "random_seed": 7})
    print("seeded /api tokens are mtrun generate's:", sampled["tokens"][0] == sample_ids)
    body = {"prompt": "hello", "max_tokens": 12, "temperature": 1, "seed": 7}
    first, second = (server.json("POST", "/v1/completions", body) for _ in range(2))
    print("seeded /v1/completions repeats:", first["choices"] == second["choices"],
          first["choices"][0]["text"] == sampled["text"][0][5:])

    # Log probabilities: log_softmax of mtrun generate's logits at each position.
    scored = server.json("PUT", "/api", {"prompts": ["hello"], "tokens_to_generate": 0,
                                         "logprobs": True})
    expected = [float(row[token] - np.log(np.exp(row - row.max()).sum()) - row.max())
                for row, token in zip(logits[:4].astype(np.float64), hello[1:])]
    print("logprobs:", scored["tokens"][0] == hello, len(scored["logprobs"][0]),
          bool(np.allclose(scored["logprobs"][0], expected, atol=1e-4)))

    # A stop string: the greedy text up to its first "!".
    text = choices[0]["text"]
    stopped = server.json("POST", "/v1/completions", {"prompt": "hello", "max_tokens": 20,
                                                      "temperature": 0, "stop": "!"})
    print("stop string:", stopped["choices"][0]["text"] == text[:text.index("!")],
          stopped["choices"][0]["finish_reason"])

    # The refusals, with their status and message.
    server.show("bad JSON", "PUT", "/api", raw=b'{"prompts": ["hello"]')
    server.show("not an object", "POST", "/v1/completions", raw=b"[1]")
    server.show("unknown /api", "PUT", "/api", {"prompts": ["hello"], "temprature": 0.5})
    server.show("unknown openai", "POST", "/v1/completions", {"prompt": "hello", "temprature": 1})
    server.show("temperature", "POST", "/v1/completions", {"prompt": "hello", "temperature": -1})
    server.show("top_p /api", "PUT", "/api", {"prompts": ["hello"], "top_p": 1.5})
    server.show("top_p openai", "POST", "/v1/completions", {"prompt": "hello", "top_p": 0})
    server.show("top_k and top_p", "PUT", "/api", {"prompts": ["hello"], "top_k": 2, "top_p": 0.5})
    server.show("window", "PUT", "/api", {"prompts": ["hello"], "tokens_to_generate": 60})
    server.show("full prompt", "POST", "/v1/completions", {"prompt": "x" * 64})
    server.show("empty /api", "PUT", "/api", {"prompts": [""]})
    server.show("empty openai", "POST", "/v1/completions", {"prompt": ""})
    server.show("stop_token", "PUT", "/api", {"prompts": ["hello"], "stop_token": 300})
    server.show("stream", "POST", "/v1/completions", {"prompt": "hello", "stream": True})
    server.show("n", "POST", "/v1/completions", {"prompt": "hello", "n": 2})
    server.show("too large", "PUT", "/api", raw=b" " * (MAX_REQUEST_BYTES + 1))
    server.show("too large chunked", "POST", "/v1/completions",
                raw=b" " * (3 * MAX_REQUEST_BYTES), chunked=True)
    server.show("just fits", "PUT", "/api",
                raw=json.dumps({"prompts": ["hi"], "tokens_to_generate": 1, "temperature": 0})
                .encode().ljust(MAX_REQUEST_BYTES))
    server.show("wrong method", "GET", "/api")
    server.show("wrong method openai", "DELETE", "/v1/completions")
    server.show("no such path", "GET", "/nowhere")
    server.show("no such path openai", "POST", "/v1/chat/completions", {"messages": []})
    server.show("health", "GET", "/health")
    server.show("models", "GET", "/v1/models")

    # One generation request at a time (--max-concurrency 1): another one while a long one
    # computes is refused at once, and served once the long one is done.
    # On a loaded host the long request (milliseconds with the KV cache) can end between
    # /health's answer and the second request's arrival: up to five tries for an overlap (a
    # server that never refuses still fails).
    long_body = {"prompts": ["hello"] * 4, "tokens_to_generate": 40, "temperature": 0}
    for _ in range(5):
        (long_status, _), (status, text) = busy_check(
            server, long_body, "POST", "/v1/completions", {"prompt": "hi", "max_tokens": 2})
        if status == 503:
            break
    print("long request:", long_status)
    print("busy:", status, text)
    server.show("after", "PUT", "/api", {"prompts": ["hi"], "tokens_to_generate": 2,
                                         "temperature": 0})

    # The latency of a 20-token greedy completion (for the record, not checked).
    times = []
    for _ in range(5):
        start = time.perf_counter()
        server.json("POST", "/v1/completions", {"prompt": "hello", "max_tokens": 20,
                                                "temperature": 0})
        times.append(time.perf_counter() - start)
    print(f"20-token greedy completion: median {statistics.median(times) * 1000:.1f} ms "
          f"(min {min(times) * 1000:.1f}, max {max(times) * 1000:.1f})", file=sys.stderr)


def main():
    mtrun, plan, ckpt, workdir, greedy_file, sample_file, logits_file = sys.argv[1:8]
    greedy_ids = [int(t) for t in open(greedy_file).read().split()]
    sample_ids = [int(t) for t in open(sample_file).read().split()]
    logits = np.load(logits_file)

    server = Server(mtrun, plan, ckpt, workdir, "serve")
    try:
        requests(server, greedy_ids, sample_ids, logits)
    finally:
        server.stop(signal.SIGTERM)

    # SIGINT while a generation computes: it ends at its next token (503) and mtrun exits.
    # The window path (--no-kv-cache, ~30 tokens/s here) keeps the 944 tokens of the request
    # computing for seconds, so the signal lands during the generation; with the KV cache
    # the request can finish before it.
    server = Server(mtrun, plan, ckpt, workdir, "interrupted", ["--no-kv-cache"])
    interrupted = False
    try:
        result = {}
        long_body = {"prompts": ["hello"] * 16, "tokens_to_generate": 59, "temperature": 0}
        worker = threading.Thread(
            target=lambda: result.update(long=server.send("PUT", "/api", long_body)))
        worker.start()
        while json.loads(server.send("GET", "/health")[1])["active_requests"] == 0:
            time.sleep(0.001)
        time.sleep(0.2)
        server.process.send_signal(signal.SIGINT)
        interrupted = True
        worker.join(timeout=60)
        print("interrupted request:", *result.get("long", ("none",)))
    finally:
        server.stop(None if interrupted else signal.SIGINT)


if __name__ == "__main__":
    main()
