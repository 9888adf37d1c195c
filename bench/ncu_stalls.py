#!/usr/bin/env python3
"""Where a kernel's warps wait, from Nsight Compute's per-instruction stall samples.

Input: the source page of an ncu report collected with `--section SourceCounters`, exported as CSV with SASS:

    ncu ... --section SourceCounters -o report <program>
    ncu --import report.ncu-rep --page source --csv --print-source sass > kernel.csv   # .csv or .csv.gz

Prints, per file: the share of all warp samples by stall reason, and the instructions that hold the most samples
(with their two largest reasons and how often they ran). With --match, also the samples of every instruction whose
SASS contains the given text (e.g. the first use of a load, to follow one wait across a kernel's loop copies).
Shares are of all samples: producer, consumer and idle warps together. Standard library only.

    python3 bench/ncu_stalls.py bench/results/h200/experiments/2026-11-30-s10/6-ncu-restart/src-4096-0.csv.gz
"""
import argparse
import csv
import gzip
import sys

ALL = "Warp Stall Sampling (All Samples)"


def read_source_page(path):
    """(kernel name, header, rows) of an ncu source-page CSV export."""
    opener = gzip.open if path.endswith(".gz") else open
    with opener(path, "rt", newline="") as f:
        rows = list(csv.reader(f))
    if len(rows) < 2 or not rows[0] or rows[0][0] != "Kernel Name":
        raise ValueError(f"{path}: not an ncu source page export (first row should name the kernel)")
    header = rows[1]
    for need in ("Source", ALL, "Instructions Executed"):
        if need not in header:
            raise ValueError(f"{path}: column '{need}' missing (collect with --section SourceCounters)")
    return rows[0][1] if len(rows[0]) > 1 else "", header, rows[2:]


def summarize(path, top, match):
    kernel, header, rows = read_source_page(path)
    col = {h: i for i, h in enumerate(header)}
    reasons = [h for h in header if h.startswith("stall_") and "Not Issued" not in h]

    def val(r, h):
        v = r[col[h]] if col[h] < len(r) else ""
        return int(v) if v.strip().lstrip("-").isdigit() else 0

    total = sum(val(r, ALL) for r in rows)
    out = [f"== {path}", f"   kernel: {kernel}", f"   samples: {total}"]
    if total == 0:
        return out + ["   (no samples)"]
    by_reason = sorted(((sum(val(r, h) for r in rows), h) for h in reasons), reverse=True)
    listed = sum(n for n, _ in by_reason)
    # ncu's export names most reasons, not all (on the H200, ~4 % of a wgmma kernel's samples): the rest is shown
    out.append("   by reason: " + ", ".join(f"{h[6:]} {100 * n / total:.1f}%" for n, h in by_reason if n > 0) +
               (f", not named in the export {100 * (total - listed) / total:.1f}%" if listed != total else ""))
    out.append(f"   top {top} instructions (share of all samples; index; times executed; SASS; main reasons):")
    order = sorted(range(len(rows)), key=lambda k: -val(rows[k], ALL))[:top]
    for k in order:
        r = rows[k]
        main = sorted(reasons, key=lambda h: -val(r, h))[:2]
        why = " ".join(f"{h[6:]} {100 * val(r, h) / total:.2f}%" for h in main if val(r, h) > 0)
        out.append(f"   {100 * val(r, ALL) / total:6.2f}%  #{k:<5d} x{r[col['Instructions Executed']]:>9}  "
                   f"{r[col['Source']].strip()[:64]:64s} {why}")
    if match:
        hits = [(k, val(r, ALL)) for k, r in enumerate(rows) if match in r[col["Source"]]]
        out.append(f"   instructions containing '{match}': {len(hits)}, {100 * sum(n for _, n in hits) / total:.2f}% of "
                   "samples: " + ", ".join(f"#{k} {100 * n / total:.2f}%" for k, n in hits))
    return out


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("csv", nargs="+", help="ncu --page source --csv --print-source sass exports (.csv or .csv.gz)")
    ap.add_argument("--top", type=int, default=15, help="instructions to list per file (default 15)")
    ap.add_argument("--match", default="", help="also total the samples of instructions whose SASS contains this")
    args = ap.parse_args()
    status = 0
    for path in args.csv:
        try:
            print("\n".join(summarize(path, args.top, args.match)))
        except (OSError, ValueError) as e:
            print(f"ncu_stalls: {e}", file=sys.stderr)
            status = 1
    return status


if __name__ == "__main__":
    sys.exit(main())
