#!/usr/bin/env python3
"""`fp4moe bench moe --tactics`: 'all', 'default', or '|'-separated parts of tactic names. On the CPU build:
a filter benches only the matching tactics, an empty alternative and a filter matching nothing fail with a
message naming the flag. Exit status: 0 pass, 1 fail, 77 skipped (no fp4moe binary given).
"""
import argparse
import os
import subprocess
import sys


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--fp4moe", default="")
    args, _ = ap.parse_known_args()
    if not args.fp4moe or not os.path.exists(args.fp4moe):
        print("skipped: no fp4moe binary (--fp4moe)")
        return 77
    failures = []
    base = [args.fp4moe, "bench", "moe", "--hidden", "64", "--intermediate", "32", "--experts", "8", "--top-k", "2",
            "--tokens", "1", "--no-auto", "--warmup", "0", "--iters", "1", "--threads", "2", "--pool-gib", "0.001"]

    def run(*extra):
        return subprocess.run(base + list(extra), capture_output=True, text=True, timeout=120)

    r = run("--tactics", "block_n=auto|fp32")
    rows = [l for l in r.stdout.splitlines() if l.startswith("cpu.")]
    if r.returncode != 0:
        failures.append(f"filter run: exit {r.returncode}: {r.stderr[-300:]}")
    elif len(rows) != 2 or not any("block_n=auto" in l for l in rows) or not any("fp32" in l for l in rows):
        failures.append(f"filter 'block_n=auto|fp32' should give one cpu.fast and one cpu.ref row, got: {rows}")

    r = run("--tactics", "block_n=auto||fp32")
    if r.returncode == 0 or "--tactics 'block_n=auto||fp32': an empty alternative" not in r.stderr:
        failures.append(f"empty alternative: exit {r.returncode}, stderr {r.stderr[-300:]!r}")

    r = run("--tactics", "stages=4")
    if r.returncode == 0 or "--tactics 'stages=4' matches no tactic" not in r.stderr or "cpu.fast [isa=" not in r.stderr:
        failures.append(f"no match: exit {r.returncode}, stderr {r.stderr[-400:]!r}")

    for f in failures:
        print("FAIL:", f)
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
