#!/usr/bin/env python3
"""bench/ncu_stalls.py: shares by stall reason and the top instructions of a synthetic ncu source-page export
(known numbers, plain and gzipped), the --match total, a clear error for a file that is not such an export,
and a run over a committed export of the H200 (it parses and its shares add up). Standard library only.
Exit status: 0 pass, 1 fail.
"""
import argparse
import csv
import gzip
import os
import subprocess
import sys
import tempfile

HEADER = ["Address", "Source", "Warp Stall Sampling (All Samples)", "Warp Stall Sampling (Not-issued Samples)",
          "# Samples", "Instructions Executed", "stall_long_sb", "stall_barrier", "stall_selected",
          "stall_long_sb (Not Issued)"]
# (SASS, long_sb, barrier, selected, times executed): 100 samples in all
ROWS = [("LDG.E.128 R20, desc[UR4][R2.64]", 0, 0, 5, 10), ("IMAD.SHL.U32 R5, R20, 0x2, RZ", 30, 0, 2, 10),
        ("HGMMA.64x128x16.F32.BF16 R24, R152, gdesc[UR12], R24", 0, 0, 8, 40),
        ("WARPGROUP.DEPBAR.LE gsb0, 0x0", 0, 40, 0, 40), ("IMAD.SHL.U32 R7, R20, 0x2, RZ", 15, 0, 0, 3)]


def write_export(path):
    opener = gzip.open if path.endswith(".gz") else open
    with opener(path, "wt", newline="") as f:
        w = csv.writer(f, quoting=csv.QUOTE_ALL)
        w.writerow(["Kernel Name", "void k(int)"])
        w.writerow(HEADER)
        for i, (sass, lsb, bar, sel, ex) in enumerate(ROWS):
            n = lsb + bar + sel
            w.writerow([hex(0x100 + 16 * i), "      " + sass, n, n - sel, n, ex, lsb, bar, sel, lsb])


def run(script, *args):
    return subprocess.run([sys.executable, script, *args], capture_output=True, text=True)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--source-dir", default=os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", ".."))
    args, _ = ap.parse_known_args()
    src = os.path.abspath(args.source_dir)
    script = os.path.join(src, "bench/ncu_stalls.py")
    failures = []

    def check(cond, what):
        if not cond:
            failures.append(what)

    with tempfile.TemporaryDirectory() as tmp:
        for name in ("k.csv", "k.csv.gz"):
            path = os.path.join(tmp, name)
            write_export(path)
            r = run(script, path, "--top", "2", "--match", ", R20, 0x2,")
            check(r.returncode == 0, f"{name}: exit {r.returncode}: {r.stderr}")
            out = r.stdout
            check("samples: 100" in out, f"{name}: total samples\n{out}")
            check("by reason: long_sb 45.0%, barrier 40.0%, selected 15.0%" in out, f"{name}: shares\n{out}")
            lines = out.splitlines()
            top = [l for l in lines if l.strip().endswith("%") and "#" in l and "containing" not in l]
            check(len(top) == 2, f"{name}: --top 2 listed {len(top)}\n{out}")
            check(len(top) == 2 and "WARPGROUP.DEPBAR" in top[0] and "IMAD.SHL.U32 R5" in top[1],
                  f"{name}: order of the top instructions\n{out}")
            check("instructions containing ', R20, 0x2,': 2, 47.00% of samples" in out, f"{name}: --match\n{out}")
        bad = os.path.join(tmp, "bad.csv")
        with open(bad, "w") as f:
            f.write("a,b\n1,2\n")
        r = run(script, bad)
        check(r.returncode == 1 and "not an ncu source page export" in r.stderr, f"bad input: {r.returncode} {r.stderr}")

    committed = os.path.join(src, "bench/results/h200/experiments/2026-11-30-s10/6-ncu-restart/src-4096-0.csv.gz")
    r = run(script, committed, "--top", "3")
    check(r.returncode == 0, f"committed export: exit {r.returncode}: {r.stderr}")
    shares = [float(p.split()[-1].rstrip("%")) for l in r.stdout.splitlines() if "by reason:" in l
              for p in l.split("by reason:")[1].split(",")]  # the named reasons and the unnamed rest
    check(shares and abs(sum(shares) - 100.0) < 0.5, f"committed export: shares add to {sum(shares)}\n{r.stdout}")
    check("grouped_gemm_kernel" in r.stdout, "committed export: kernel name")

    for f in failures:
        print("FAIL:", f)
    print("ok" if not failures else f"{len(failures)} failure(s)")
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
