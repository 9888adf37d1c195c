#!/usr/bin/env python3
"""Plot `fp4moe bench moe --json` results: time per block (log-log) and % of the measured floor vs tokens.

    python3 bench/plot.py bench/results/cpu/glm-4.5-air.json -o glm-4.5-air.png

One line per runner (tactic 0) or runner#tactic, `auto` dashed. Needs matplotlib (scripts/setup.sh).
The C++ CLI writes the same plot as SVG itself (`--plot FILE.svg`); this script is for PNG.
"""
import argparse
import json
from collections import defaultdict


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("json", nargs="+", help="bench moe JSON files (rows are merged)")
    ap.add_argument("-o", "--out", required=True, help="output image (.png, .pdf, .svg)")
    args = ap.parse_args()

    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    series = defaultdict(list)
    meta = None
    for path in args.json:
        with open(path) as f:
            doc = json.load(f)
        meta = meta or doc["meta"]
        for r in doc["rows"]:
            if r.get("us") is None:
                continue
            name = r["runner"] if r["runner"] == "auto" or r.get("tactic_id", 0) == 0 else f'{r["runner"]}#{r["tactic_id"]}'
            if len(args.json) > 1:
                name = f'{r["shape"]} {name}'
            series[name].append((r["tokens"], r["us"], r["pct_floor"]))

    fig, (a0, a1) = plt.subplots(1, 2, figsize=(12, 4.8))
    for name, pts in sorted(series.items()):
        pts.sort()
        t = [p[0] for p in pts]
        style = "--" if name.endswith("auto") else "-"
        a0.plot(t, [p[1] for p in pts], style, marker="o", label=name)
        a1.plot(t, [p[2] for p in pts], style, marker="o", label=name)
    a0.set_xscale("log", base=2)
    a0.set_yscale("log")
    a0.set_xlabel("tokens T")
    a0.set_ylabel("µs per MoE block")
    a1.set_xscale("log", base=2)
    a1.set_xlabel("tokens T")
    a1.set_ylabel("% of measured floor")
    a1.set_ylim(bottom=0)
    for a in (a0, a1):
        a.grid(True, which="both", alpha=0.3)
    a1.legend(fontsize=8)
    fig.suptitle(
        f'{meta["shape"]} on {meta["device"]}: floor = max(bytes / {meta["bandwidth_gbps"]:.1f} GB/s, '
        f'flops / {meta["peak_tflops"]:.3f} TFLOP/s)',
        fontsize=10,
    )
    fig.tight_layout()
    fig.savefig(args.out, dpi=110)


if __name__ == "__main__":
    main()
