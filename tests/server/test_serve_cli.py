#!/usr/bin/env python3
"""End-to-end run of the real `fp4moe serve` binary on a tiny model, with urllib as the client.

Checks: with no --model it creates models/tiny in the working directory (saying so) and prints the URL it listens
on (--port 0: a free port); /health, /v1/models and a completion answer; SIGTERM while a stream is in flight
drains: /health turns 503, a new request gets 503, the stream runs to its last token and `data: [DONE]`, and the
process exits 0.
Usage: test_serve_cli.py --fp4moe BIN --build-dir D --source-dir S   (exit 0 pass, 1 fail, 77 skip)
"""
import argparse
import json
import os
import re
import signal
import subprocess
import sys
import tempfile
import threading
import time
import urllib.error
import urllib.request

LISTENING = re.compile(r"listening on (http://[\d.]+:\d+)")


class server:
    """`fp4moe serve` in a subprocess; its stdout+stderr collected by a thread."""

    def __init__(self, binary, args, cwd):
        self.p = subprocess.Popen([binary, "serve", *args], cwd=cwd, stdout=subprocess.PIPE,
                                  stderr=subprocess.STDOUT, text=True)
        self.lines = []
        self.t = threading.Thread(target=self._read, daemon=True)
        self.t.start()

    def _read(self):
        for line in self.p.stdout:
            self.lines.append(line)

    def output(self):
        return "".join(self.lines)

    def wait_url(self, timeout=120):
        end = time.time() + timeout
        while time.time() < end:
            m = LISTENING.search(self.output())
            if m:
                return m.group(1)
            if self.p.poll() is not None:
                return None
            time.sleep(0.05)
        return None

    def kill(self):
        if self.p.poll() is None:
            self.p.kill()
            self.p.wait()


def request(url, path, body=None, timeout=30):
    """(status, parsed JSON or text); never raises for an HTTP status."""
    data = None if body is None else json.dumps(body).encode()
    req = urllib.request.Request(url + path, data=data, headers={"Content-Type": "application/json"})
    try:
        with urllib.request.urlopen(req, timeout=timeout) as r:
            raw = r.read().decode()
            status = r.status
    except urllib.error.HTTPError as e:
        raw, status = e.read().decode(), e.code
    try:
        return status, json.loads(raw)
    except ValueError:
        return status, raw


def sglang_bench_parse(url, prompt, output_len):
    """The streaming parse of sglang.bench_serving's async_request_sglang_generate (--backend sglang), line for
    line over urllib instead of aiohttp: (success, generated_text, output_len, number of ITL entries)."""
    payload = {"text": prompt, "sampling_params": {"temperature": 0.0, "max_new_tokens": output_len,
                                                   "ignore_eos": True},
               "stream": True, "lora_path": None, "return_logprob": False, "logprob_start_len": -1}
    req = urllib.request.Request(url + "/generate", data=json.dumps(payload).encode(),
                                 headers={"Content-Type": "application/json"})
    generated_text, ttft, itl, last_output_len, out_len = "", 0.0, [], 0, output_len
    st = time.perf_counter()
    most_recent = st
    with urllib.request.urlopen(req, timeout=60) as response:
        if response.status != 200:
            return False, "", 0, 0
        for chunk_bytes in response:
            chunk_bytes = chunk_bytes.strip()
            if not chunk_bytes:
                continue
            chunk = chunk_bytes.decode("utf-8")
            chunk = chunk[len("data: "):] if chunk.startswith("data: ") else chunk
            if chunk == "[DONE]":
                continue
            data = json.loads(chunk)
            if "text" in data and data["text"]:
                timestamp = time.perf_counter()
                generated_text = data["text"]
                out_len = data["meta_info"]["completion_tokens"]
                if ttft == 0.0:
                    ttft = time.perf_counter() - st
                else:
                    num_new = out_len - last_output_len
                    if num_new == 0:
                        continue
                    itl.extend([(timestamp - most_recent) / num_new] * num_new)
                most_recent = timestamp
                last_output_len = out_len
    return True, generated_text, out_len, len(itl)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--fp4moe", required=True)
    ap.add_argument("--build-dir")
    ap.add_argument("--source-dir")
    a = ap.parse_args()
    a.fp4moe = os.path.abspath(a.fp4moe)  # the server runs in a temporary working directory
    failures = []

    def check(cond, what):
        if not cond:
            failures.append(what)
        return cond

    with tempfile.TemporaryDirectory() as d:
        s = server(a.fp4moe, ["--port", "0", "--moe-runner", "cpu.ref", "--threads", "2", "--served-model-name",
                              "tiny"], cwd=d)
        try:
            url = s.wait_url()
            if not check(url is not None, "the server prints the URL it listens on"):
                print(s.output())
                return 1
            check("creating the tiny generated model" in s.output(), "no --model: says it creates models/tiny")
            check(os.path.isfile(os.path.join(d, "models", "tiny", "config.json")), "models/tiny was created")

            st, body = request(url, "/health")
            check(st == 200 and body == {"status": "ok"}, f"/health: {st} {body}")
            st, body = request(url, "/v1/models")
            check(st == 200 and body["data"][0]["id"] == "tiny", f"/v1/models: {st} {body}")
            st, body = request(url, "/v1/completions", {"model": "tiny", "prompt": "Hello", "max_tokens": 5,
                                                         "temperature": 0, "ignore_eos": True})
            check(st == 200 and body["choices"][0]["finish_reason"] == "length"
                  and body["usage"]["completion_tokens"] == 5, f"completion: {st} {body}")
            st, body = request(url, "/v1/completions", {"model": "tiny", "prompt": "Hello", "max_tokens": 0})
            check(st == 400 and body["error"]["param"] == "max_tokens", f"max_tokens 0: {st} {body}")

            ok, text, out_len, n_itl = sglang_bench_parse(url, "The benchmark prompt", 24)
            check(ok and text and out_len == 24, f"sglang.bench_serving's parse: {ok} {out_len} {text!r}")
            check(1 <= n_itl <= 23, f"ITL entries after the first token: {n_itl}")

            # A long stream; SIGTERM after its first chunk.
            n = 1000
            req = urllib.request.Request(url + "/v1/completions", headers={"Content-Type": "application/json"},
                                         data=json.dumps({"prompt": "drain", "max_tokens": n, "temperature": 0,
                                                          "ignore_eos": True, "stream": True,
                                                          "stream_options": {"include_usage": True}}).encode())
            resp = urllib.request.urlopen(req, timeout=60)
            first = resp.readline().decode()
            check(first.startswith("data: {"), f"first stream line: {first!r}")
            s.p.send_signal(signal.SIGTERM)
            saw_health_503 = saw_request_503 = False
            end = time.time() + 10
            while time.time() < end and not saw_health_503:
                try:
                    st, _ = request(url, "/health", timeout=5)
                except OSError:
                    break  # the listener closed: the drain finished first
                saw_health_503 = st == 503
            if saw_health_503:
                try:
                    st, body = request(url, "/v1/completions", {"prompt": "late", "max_tokens": 2}, timeout=5)
                    saw_request_503 = st == 503 and body["error"]["code"] == 503
                except OSError:
                    saw_request_503 = True  # refused: equally "not accepted"
            check(saw_health_503, "/health is 503 while draining")
            check(saw_request_503, "a new request during the drain is refused with 503")

            rest = resp.read().decode()
            resp.close()
            events = [e[len("data: "):] for e in (first + rest).split("\n\n") if e]
            check(events and events[-1] == "[DONE]", f"the stream ends with [DONE]: {events[-2:]}")
            chunks = [json.loads(e) for e in events[:-1]]
            finishes = [c["choices"][0]["finish_reason"] for c in chunks if c["choices"]
                        and c["choices"][0]["finish_reason"] is not None]
            check(finishes == ["length"], f"one finish_reason, 'length' (ran to the end): {finishes}")
            usage = chunks[-1].get("usage") if chunks else None
            check(usage is not None and usage["completion_tokens"] == n, f"usage counts all {n} tokens: {usage}")

            try:
                rc = s.p.wait(timeout=60)
            except subprocess.TimeoutExpired:
                rc = None
            check(rc == 0, f"exit code 0 after the drain, got {rc}")
            s.t.join(timeout=5)
            check("stopped" in s.output(), "prints that it stopped")
        finally:
            s.kill()
        if failures:
            print(s.output()[-3000:])

    for f in failures:
        print("FAIL:", f)
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
