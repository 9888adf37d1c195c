#!/usr/bin/env python3
"""End-to-end run of `fp4moe generate` on a tiny make-model checkpoint.

Checks: text streams to stdout and a summary line (prompt tokens, generated tokens, tokens/s, finish reason) goes
to stderr; seeded sampling is reproducible; --max-tokens bounds the output; --chat renders the template; no
--model exits 2 with the make-model hint; a bad sampling flag exits 2 naming the parameter.
Usage: test_generate_cli.py --fp4moe BIN --build-dir D --source-dir S   (exit 0 pass, 1 fail, 77 skip)
"""
import argparse
import re
import subprocess
import sys
import tempfile

SUMMARY = re.compile(r"prompt tokens: (\d+), generated tokens: (\d+), prefill: [\d.]+ tokens/s \([\d.]+ s\), "
                     r"decode: [\d.]+ tokens/s, finish reason: (stop|length)")


def run(binary, *args):
    return subprocess.run([binary, *args], capture_output=True, text=True, timeout=120)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--fp4moe", required=True)
    ap.add_argument("--build-dir")
    ap.add_argument("--source-dir")
    a = ap.parse_args()
    failures = []

    def check(cond, what, proc=None):
        if not cond:
            failures.append(what + (f"\n  rc={proc.returncode}\n  stdout={proc.stdout!r}\n  stderr={proc.stderr!r}"
                                    if proc else ""))

    p = run(a.fp4moe, "generate", "--prompt", "hi")
    check(p.returncode == 2 and "make-model --preset tiny --out" in p.stderr, "no --model: exit 2 with the hint", p)

    with tempfile.TemporaryDirectory() as d:
        m = f"{d}/m"
        p = run(a.fp4moe, "make-model", "--preset", "tiny", "--out", m, "--threads", "2", "--no-progress")
        if p.returncode != 0:
            print(p.stderr)
            return 1
        common = ["generate", "--model", m, "--threads", "2", "--max-batch-tokens", "32"]

        p = run(a.fp4moe, *common, "--prompt", "hi")
        check(p.returncode == 0, "plain generate succeeds", p)
        s = SUMMARY.search(p.stderr)
        check(s is not None, "summary line on stderr", p)

        seeded = ["--prompt", "hello there", "--temperature", "0.8", "--top-p", "0.9", "--seed", "3",
                  "--max-tokens", "12", "--ignore-eos"]
        p1 = run(a.fp4moe, *common, *seeded)
        p2 = run(a.fp4moe, *common, *seeded)
        check(p1.returncode == 0 and p1.stdout == p2.stdout, "seeded output is reproducible", p2)
        s = SUMMARY.search(p1.stderr)
        check(s is not None and s.group(2) == "12" and s.group(3) == "length", "--max-tokens 12 -> 12, length", p1)
        check(p1.stdout.strip() != "", "some text was printed", p1)

        p = run(a.fp4moe, *common, "--chat", "--system", "be brief", "--prompt", "hi", "--max-tokens", "3")
        s = SUMMARY.search(p.stderr)
        # GLM template: "[gMASK]<sop><|system|>\nbe brief<|user|>\nhi<|assistant|>" is well over 3 tokens.
        check(p.returncode == 0 and s is not None and int(s.group(1)) > 6, "--chat renders the template", p)

        p = run(a.fp4moe, *common, "--prompt", "hi", "--top-p", "1.5")
        check(p.returncode == 2 and "top_p must be in (0, 1], got 1.5" in p.stderr, "bad --top-p exits 2", p)

    for f in failures:
        print("FAIL:", f)
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
