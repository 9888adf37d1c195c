#!/usr/bin/env python3
"""bench/acceptance.py on the committed H100 run (bench/results/h100) and on folders derived from it: the table's
figures are the JSON's, each row's verdict follows issue 4's bars (% of floor by shape at T in {1, 4, 16, 64}, 3x the
peer at T <= 64), shapes without files are left out, and an unreadable folder is an error that names the file.
Standard library only. Exit status: 0 pass, 1 fail.
"""
import argparse
import json
import os
import shutil
import subprocess
import sys
import tempfile


def body(md):
    """Cells of the table's body rows, keyed by (shape, T)."""
    lines = [l for l in md.splitlines() if l.startswith("|")][2:]
    cells = [[c.strip() for c in l.strip("|").split(" | ")] for l in lines]
    return {(c[0], int(c[1])): c for c in cells}


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--source-dir", default=os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", ".."))
    args, _ = ap.parse_known_args()  # --fp4moe and --build-dir are not needed
    src = os.path.abspath(args.source_dir)
    tool = os.path.join(src, "bench/acceptance.py")
    run_dir = os.path.join(src, "bench/results/h100")
    failures = []

    def check(cond, what):
        if not cond:
            failures.append(what)

    def run(d, *extra):
        return subprocess.run([sys.executable, tool, d, *extra], capture_output=True, text=True)

    with tempfile.TemporaryDirectory() as tmp:
        # The committed run: every figure comes from the JSON, every verdict from the bars.
        md_path = os.path.join(tmp, "acceptance.md")
        p = run(run_dir, "--md", md_path)
        check(p.returncode == 0, f"committed run: exit {p.returncode}: {p.stderr}")
        with open(md_path) as f:
            check(f.read() == p.stdout, "--md file differs from stdout")
        rows = body(p.stdout)
        check(len(rows) == 12, f"committed run: {len(rows)} rows, expected 3 shapes x 4 T")
        bars = {"glm-4.5-air": 80.0, "deepseek-v3": 80.0, "qwen3-30b-a3b": 50.0}
        met_rows = 0
        for shape, bar in bars.items():
            with open(os.path.join(run_dir, f"{shape}.json")) as f:
                ours = json.load(f)["rows"]
            with open(os.path.join(run_dir, f"torch-{shape}.json")) as f:
                peer = {r["tokens"]: r["us"] for r in json.load(f)["rows"]}
            for t in (1, 4, 16, 64):
                auto = [r for r in ours if r["runner"] == "auto" and r["tokens"] == t][0]
                best = min(r["us"] for r in ours if r["runner"] != "auto" and r["tokens"] == t and r.get("us"))
                c = rows.get((shape, t))
                if c is None:
                    failures.append(f"no row for {shape} T = {t}")
                    continue
                check(c[2] == f"{auto['us']:.1f}", f"{shape} T = {t}: auto us {c[2]}")
                check(c[3] == f"{auto['pct_floor']:.1f} %", f"{shape} T = {t}: auto % {c[3]}")
                check(c[4].startswith(f"{best:.1f} ("), f"{shape} T = {t}: best listed {c[4]}")
                check(c[6] == f"{peer[t] / auto['us']:.2f}x", f"{shape} T = {t}: speedup {c[6]}")
                met = auto["pct_floor"] >= bar and peer[t] / auto["us"] >= 3.0
                met_rows += met
                check(c[8] == ("yes" if met else "**no**"), f"{shape} T = {t}: verdict {c[8]}, expected met={met}")
        # Known rows of every committed H100 run so far, so a verdict that cannot fail would show: glm-4.5-air T = 1
        # misses (58-66 %), T = 16 meets (85-91 %).
        check(rows.get(("glm-4.5-air", 1), [""] * 9)[8] == "**no**", "glm-4.5-air T = 1 should miss 80 %")
        check(rows.get(("glm-4.5-air", 16), [""] * 9)[8] == "yes", "glm-4.5-air T = 16 should meet 80 %")
        check(f"{met_rows} of 12 rows meet" in p.stdout, f"summary line: expected {met_rows} of 12 rows met")

        # One shape only, with a slow auto row: the speedup bar alone fails it.
        one = os.path.join(tmp, "one")
        os.mkdir(one)
        with open(os.path.join(run_dir, "qwen3-30b-a3b.json")) as f:
            doc = json.load(f)
        for r in doc["rows"]:
            if r["runner"] == "auto" and r["tokens"] == 16:
                r["us"] *= 2.0  # 209 us against the peer's 394: 1.9x
        with open(os.path.join(one, "qwen3-30b-a3b.json"), "w") as f:
            json.dump(doc, f)
        shutil.copy(os.path.join(run_dir, "torch-qwen3-30b-a3b.json"), one)
        p = run(one)
        rows = body(p.stdout)
        check(p.returncode == 0 and len(rows) == 4, f"one shape: exit {p.returncode}, {len(rows)} rows")
        check(rows.get(("qwen3-30b-a3b", 16), [""] * 9)[8] == "**no**", "a 1.9x speedup should miss the 3x bar")

        # Errors name the file and what is missing.
        os.remove(os.path.join(one, "torch-qwen3-30b-a3b.json"))
        p = run(one)
        check(p.returncode == 2 and "torch-qwen3-30b-a3b.json" in p.stderr, f"missing peer: {p.returncode} {p.stderr}")
        empty = os.path.join(tmp, "empty")
        os.mkdir(empty)
        p = run(empty)
        check(p.returncode == 2 and "no <shape>.json" in p.stderr, f"empty folder: {p.returncode} {p.stderr}")
        bad = os.path.join(tmp, "bad")
        os.mkdir(bad)
        with open(os.path.join(bad, "glm-4.5-air.json"), "w") as f:
            f.write("{not json")
        shutil.copy(os.path.join(run_dir, "torch-glm-4.5-air.json"), bad)
        p = run(bad)
        check(p.returncode == 2 and "glm-4.5-air.json" in p.stderr, f"bad JSON: {p.returncode} {p.stderr}")

    for f in failures:
        print("FAIL:", f)
    if not failures:
        print("PASS: bench/acceptance.py")
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
