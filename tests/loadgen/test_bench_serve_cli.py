#!/usr/bin/env python3
"""`fp4moe bench serve` against a live `fp4moe serve` (tiny model, loopback), cross-checked with numpy.

Checks: flag and reachability errors exit 1 naming the flag or URL; a sglang-backend sweep (token-id prompts) and an
OpenAI-backend pass succeed with no failed request; the request lengths are numpy's `randint` draws for the seed
(as sglang.bench_serving's random dataset), and the server reports exactly the requested output tokens; every
metric of each `--output-file` line (read with Python's json, `Infinity` included) is recomputed from its
per-request lists with sglang's formulas in numpy and must agree; --json, --md and --plot are written.
Usage: test_bench_serve_cli.py --fp4moe BIN --build-dir D --source-dir S   (exit 0 pass, 1 fail, 77 skip)
"""
import argparse
import json
import math
import os
import queue
import re
import signal
import subprocess
import sys
import tempfile
import threading
import xml.dom.minidom

try:
    import numpy as np
except ImportError:
    print("skipped: numpy is not installed (scripts/setup.sh installs it)")
    sys.exit(77)


def start_server(binary, cwd):
    """Starts `fp4moe serve --port 0` in cwd; returns (process, url) once it listens."""
    p = subprocess.Popen([binary, "serve", "--port", "0", "--threads", "2"], cwd=cwd, stdout=subprocess.PIPE,
                         stderr=subprocess.STDOUT, text=True)
    lines = queue.Queue()
    threading.Thread(target=lambda: [lines.put(l) for l in p.stdout], daemon=True).start()
    log = []
    while True:
        try:
            line = lines.get(timeout=120)
        except queue.Empty:
            p.kill()
            raise RuntimeError("fp4moe serve did not start:\n" + "".join(log))
        log.append(line)
        m = re.search(r"listening on (http://\S+)", line)
        if m:
            return p, m.group(1)


def numpy_metrics(r):
    """sglang's calculate_metrics over the per-request lists of one output-file line."""
    ok = [i for i, e in enumerate(r["errors"]) if e == ""]
    ttfts = [r["ttfts"][i] for i in ok]
    lat = [r["latencies"][i] for i in ok]
    outs = [r["output_lens"][i] for i in ok]
    itls = [x for i in ok for x in r["itls"][i]]
    tpots = [(lat[k] - ttfts[k]) / (outs[k] - 1) for k in range(len(ok)) if outs[k] > 1]
    d = r["duration"]
    m = {"completed": len(ok), "total_input_tokens": sum(r["input_lens"][i] for i in ok),
         "total_output_tokens": sum(outs), "request_throughput": len(ok) / d,
         "output_throughput": sum(outs) / d, "concurrency": float(np.sum(lat)) / d}
    for name, v in (("ttft", ttfts), ("tpot", tpots), ("itl", itls), ("e2e_latency", lat)):
        v = v or [0]
        m[f"mean_{name}_ms"] = np.mean(v) * 1000
        m[f"median_{name}_ms"] = np.median(v) * 1000
        m[f"std_{name}_ms"] = np.std(v) * 1000
        m[f"p99_{name}_ms"] = np.percentile(v, 99) * 1000
    m["p95_itl_ms"] = np.percentile(itls or [0], 95) * 1000
    starts = [r["start_times"][i] for i in ok]
    t0, t1 = min(starts), max(s + l for s, l in zip(starts, lat))
    n = int(np.ceil(t1 - t0)) + 1
    tokens, running = np.zeros(n), np.zeros(n)
    for k, i in enumerate(ok):
        t = starts[k] + ttfts[k]
        times = [t]
        for g in r["itls"][i]:
            t += g
            times.append(t)
        for t in times:
            b = int(t - t0)
            if 0 <= b < n:
                tokens[b] += 1
        for s in range(int(starts[k] - t0), min(int(starts[k] + lat[k] - t0) + 1, n)):
            running[s] += 1
    m["max_output_tokens_per_s"] = float(np.max(tokens))
    m["max_concurrent_requests"] = int(np.max(running))
    return m


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--fp4moe", required=True)
    ap.add_argument("--build-dir")
    ap.add_argument("--source-dir")
    a = ap.parse_args()
    failures = []

    def check(cond, what, proc=None):
        if not cond:
            failures.append(what + (f"\n  rc={proc.returncode}\n  stdout={proc.stdout[-3000:]!r}\n  "
                                    f"stderr={proc.stderr[-3000:]!r}" if proc else ""))

    def bench(*args):
        return subprocess.run([a.fp4moe, "bench", "serve", *args], capture_output=True, text=True, timeout=240)

    p = bench("--url", "http://127.0.0.1:1", "--num-prompts", "2")
    check(p.returncode == 1 and "http://127.0.0.1:1/v1/models" in p.stderr, "unreachable server names the URL", p)
    for flags, needle in ((["--request-rate", "fast"], "--request-rate"), (["--max-concurrency", "4,0"],
                                                                           "--max-concurrency"),
                          (["--url", "https://x"], "https is not supported")):
        p = bench(*flags)
        check(p.returncode == 1 and needle in p.stderr, f"{flags} exits 1 naming {needle}", p)

    with tempfile.TemporaryDirectory() as d:
        server, url = start_server(a.fp4moe, d)
        try:
            p = bench("--url", url, "--random-range-ratio", "2", "--num-prompts", "2")
            check(p.returncode == 1 and "--random-range-ratio must be in [0, 1]" in p.stderr, "range ratio 2", p)

            n, lin, lout, seed = 12, 48, 12, 3
            common = ["--url", url, "--num-prompts", str(n), "--random-input-len", str(lin), "--random-output-len",
                      str(lout), "--seed", str(seed)]
            out = f"{d}/out.jsonl"
            p = bench(*common, "--tokenize-prompt", "--max-concurrency", "1,4", "--output-file", out,
                      "--output-details", "--json", f"{d}/r.json", "--md", f"{d}/r.md", "--plot", f"{d}/r.svg")
            check(p.returncode == 0, "sglang sweep succeeds", p)
            check(p.stdout.count("============ Serving Benchmark Result ============") == 2, "two result blocks", p)
            np.random.seed(seed)
            in_lens = np.random.randint(1, lin + 1, size=n).tolist()
            out_lens = np.random.randint(1, lout + 1, size=n).tolist()
            lines = open(out).read().splitlines() if os.path.exists(out) else []
            check(len(lines) == 2, f"two output-file lines (got {len(lines)})")
            for line in lines:
                r = json.loads(line)  # Python's json reads the Infinity sglang writes
                check(r["request_rate"] == math.inf and r["backend"] == "sglang", "request_rate inf, backend")
                check(r["completed"] == n and r["failed"] == 0, f"all {n} succeed (errors: {set(r['errors'])})")
                check(r["input_lens"] == in_lens, f"input lens are numpy's draws: {r['input_lens']} vs {in_lens}")
                check(r["output_lens"] == out_lens, f"server output lens are the requested {out_lens}: "
                                                    f"{r['output_lens']}")
                for k, v in numpy_metrics(r).items():
                    check(math.isclose(r[k], v, rel_tol=1e-9, abs_tol=1e-9),
                          f"max_concurrency {r['max_concurrency']}: {k} = {r[k]}, numpy gives {v}")
            if os.path.exists(f"{d}/r.json"):
                rep = json.load(open(f"{d}/r.json"))
                check([row["max_concurrency"] for row in rep["rows"]] == [1, 4], "--json has a row per value")
                check(rep["meta"]["models"]["data"][0]["id"] != "", "--json meta carries /v1/models")
            check(os.path.exists(f"{d}/r.md") and "| 4 | 12 | 0 |" in open(f"{d}/r.md").read(), "--md table")
            try:
                xml.dom.minidom.parse(f"{d}/r.svg")
            except Exception as e:  # noqa: BLE001 - any parse failure is a failed check
                check(False, f"--plot writes valid SVG: {e}")

            p = bench(*common, "--backend", "openai", "--max-concurrency", "4", "--json", f"{d}/o.json")
            check(p.returncode == 0, "openai backend succeeds", p)
            if p.returncode == 0:
                row = json.load(open(f"{d}/o.json"))["rows"][0]
                check(row["completed"] == n and row["total_output_tokens"] == sum(out_lens),
                      f"openai: {n} requests, usage counts {sum(out_lens)} tokens: {row['total_output_tokens']}")
        finally:
            server.send_signal(signal.SIGTERM)
            try:
                server.wait(timeout=60)
            except subprocess.TimeoutExpired:
                server.kill()

    for f in failures:
        print("FAIL:", f)
    print(f"{'FAILED' if failures else 'passed'}: bench serve CLI against fp4moe serve")
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
