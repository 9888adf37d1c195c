#!/usr/bin/env python3
"""Issue 4's acceptance table from one `scripts/gpu_bench.sh` folder, every row checked against the issue's bars.

    python3 bench/acceptance.py DIR [--md acceptance.md]

DIR holds, per shape, `<shape>.json` (`fp4moe bench moe --device cuda ... --json`, with its `auto` rows) and
`torch-<shape>.json` (bench/peers/torch_grouped_mm.py). One table row per (shape, T): the `auto` row's µs and
% of floor, the fastest listed (runner, tactic) row of the same run, the torch bf16 peer's µs, auto's speedup
over it, the bar and whether the row meets it. The bars (issue 4, "Fast"): % of floor >= 80 for glm-4.5-air and
deepseek-v3, >= 50 for qwen3-30b-a3b, at T in {1, 4, 16, 64}, and at least 3x the peer at every T <= 64. Shapes
without files in DIR are left out; rows at other T are listed with no bar. A last line counts the rows that meet
their bars.

Exit status 0 whether or not the bars hold (the table is the result); 2 for a folder it cannot read, with the
file and what is missing. Standard library only.
"""
import argparse
import json
import os
import sys

SHAPES = ("glm-4.5-air", "deepseek-v3", "qwen3-30b-a3b")
PCT_BAR = {"glm-4.5-air": 80.0, "deepseek-v3": 80.0, "qwen3-30b-a3b": 50.0}
BAR_TOKENS = (1, 4, 16, 64)
SPEEDUP_BAR = 3.0
SPEEDUP_MAX_T = 64


def fail(msg):
    print(f"acceptance.py: {msg}", file=sys.stderr)
    sys.exit(2)


def rows_of(path):
    try:
        with open(path) as f:
            doc = json.load(f)
    except (OSError, ValueError) as e:
        fail(f"{path}: {e}")
    if not isinstance(doc, dict) or not isinstance(doc.get("rows"), list):
        fail(f"{path}: not a bench moe JSON (needs a 'rows' list)")
    out = []
    for i, r in enumerate(doc["rows"]):
        if r.get("skipped") or r.get("us") is None:
            continue
        for key in ("runner", "tokens", "us", "pct_floor"):
            if key not in r:
                fail(f"{path}: row {i} has no '{key}'")
        out.append(r)
    return doc.get("meta", {}), out


def shape_rows(d, shape):
    """Table rows of one shape, or None when DIR has no result for it."""
    ours_path, peer_path = os.path.join(d, f"{shape}.json"), os.path.join(d, f"torch-{shape}.json")
    if not os.path.exists(ours_path):
        return None
    if not os.path.exists(peer_path):
        fail(f"{peer_path}: missing (the peer's rows for {ours_path})")
    meta, ours = rows_of(ours_path)
    _, peer_rows = rows_of(peer_path)
    peer = {}
    for r in peer_rows:
        if r["tokens"] not in peer or r["us"] < peer[r["tokens"]]["us"]:
            peer[r["tokens"]] = r
    out = []
    for t in sorted({r["tokens"] for r in ours}):
        autos = [r for r in ours if r["tokens"] == t and r["runner"] == "auto"]
        if not autos:
            fail(f"{ours_path}: no 'auto' row at T = {t} (run bench moe without --no-auto)")
        listed = [r for r in ours if r["tokens"] == t and r["runner"] != "auto"]
        best = min(listed, key=lambda r: r["us"]) if listed else None
        p = peer.get(t)
        auto = autos[0]
        speedup = p["us"] / auto["us"] if p else None
        bar = PCT_BAR.get(shape) if t in BAR_TOKENS else None
        checks = []
        if bar is not None:
            checks.append(auto["pct_floor"] >= bar)
        if t <= SPEEDUP_MAX_T:
            checks.append(speedup is not None and speedup >= SPEEDUP_BAR)
        out.append(dict(shape=shape, t=t, auto=auto, best=best, peer=p, speedup=speedup, bar=bar,
                        met=all(checks) if checks else None, device=meta.get("device", "")))
    return out


def render(rows):
    lines = ["| shape | T | auto µs | auto % of floor | best listed µs (% of floor) | torch bf16 peer µs "
             "| auto speedup | bar | met |",
             "|---|---:|---:|---:|---:|---:|---:|---|---|"]
    for r in rows:
        best = f"{r['best']['us']:.1f} ({r['best']['pct_floor']:.1f} %)" if r["best"] else "-"
        peer = f"{r['peer']['us']:.1f}" if r["peer"] else "-"
        speedup = f"{r['speedup']:.2f}x" if r["speedup"] is not None else "-"
        bars = []
        if r["bar"] is not None:
            bars.append(f">= {r['bar']:.0f} %")
        if r["t"] <= SPEEDUP_MAX_T:
            bars.append(f">= {SPEEDUP_BAR:.0f}x")
        met = "-" if r["met"] is None else ("yes" if r["met"] else "**no**")
        lines.append(f"| {r['shape']} | {r['t']} | {r['auto']['us']:.1f} | {r['auto']['pct_floor']:.1f} % | {best} "
                     f"| {peer} | {speedup} | {', '.join(bars) or '-'} | {met} |")
    checked = [r for r in rows if r["met"] is not None]
    missed = [f"{r['shape']} T = {r['t']}" for r in checked if not r["met"]]
    devices = sorted({r["device"] for r in rows if r["device"]})
    lines.append("")
    lines.append(f"{sum(r['met'] for r in checked)} of {len(checked)} rows meet issue 4's bars"
                 + (f" on {', '.join(devices)}" if devices else "")
                 + (f"; not met: {', '.join(missed)}." if missed else "."))
    return "\n".join(lines) + "\n"


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("dir", help="a scripts/gpu_bench.sh output folder")
    ap.add_argument("--md", help="also write the table to this file")
    args = ap.parse_args()
    if not os.path.isdir(args.dir):
        fail(f"{args.dir}: not a folder")
    rows = []
    for shape in SHAPES:
        rows += shape_rows(args.dir, shape) or []
    if not rows:
        fail(f"{args.dir}: no <shape>.json for any of {', '.join(SHAPES)}")
    md = render(rows)
    sys.stdout.write(md)
    if args.md:
        with open(args.md, "w") as f:
            f.write(md)
    return 0


if __name__ == "__main__":
    sys.exit(main())
