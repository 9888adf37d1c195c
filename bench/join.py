#!/usr/bin/env python3
"""Join `fp4moe bench moe --json` results and the PyTorch peer's (bench/peers/torch_grouped_mm.py) into one
markdown table and one plot.

    python3 bench/join.py ours.json torch.json [more.json ...] --md joined.md [--plot joined.png|.svg]

Every input is {"meta": {...}, "rows": [...]} as bench moe writes it. The table lists each source's meta,
then one line per row: runner, tactic, T, µs, GB/s, % of floor (the row's own floor: its own bytes at its
own run's measured bandwidth and peak, so bf16 bytes for the peer), % of the NVFP4 floor (the peer's
`nvfp4_floor_us`; for runners with NVFP4 weights, their own floor) and the speedup over the peer at the same
shape and T (the fastest row whose runner starts with --peer, default "torch."; blank when there is none).

The plot (matplotlib; skipped with a message when it is not importable) has µs vs T, % of own floor vs T
and, when any row carries an NVFP4 floor, % of the NVFP4 floor vs T: one line per source/runner/tactic
(--best-per-runner: one per runner, its fastest tactic at each T).
Standard library only, apart from matplotlib for --plot.
"""
import argparse
import json
import os
import sys


def load(paths):
    sources, rows = [], []
    for i, path in enumerate(paths, 1):
        with open(path) as f:
            doc = json.load(f)
        if not isinstance(doc, dict) or "meta" not in doc or "rows" not in doc:
            raise SystemExit(f"join.py: {path}: not a bench moe JSON (needs 'meta' and 'rows')")
        meta = doc["meta"]
        nvfp4 = " nvfp4 " in f' {meta.get("desc", "")} '
        sources.append(dict(index=i, path=path, meta=meta, nvfp4=nvfp4))
        for order, r in enumerate(doc["rows"]):
            rows.append(dict(r, _src=i, _order=order, _nvfp4=nvfp4))
    return sources, rows


def measured(r):
    return r.get("us") is not None and not r.get("skipped") and r["us"] > 0


def series_name(r):
    """bench moe's series naming (runner, or runner#tactic_id), with the tactic spelled out for the peer."""
    if r["runner"] == "auto" or not r.get("tactic_id"):
        name = r["runner"]
    else:
        name = f'{r["runner"]}#{r["tactic_id"]}'
    if r["runner"].startswith("torch.") and r.get("tactic"):
        name = f'{r["runner"]} [{r["tactic"]}]'
    return name


def nvfp4_floor_us(r):
    if r.get("nvfp4_floor_us") is not None:
        return r["nvfp4_floor_us"]
    if r["_nvfp4"] and measured(r) and r.get("pct_floor") is not None:
        return r["pct_floor"] / 100.0 * r["us"]  # its own floor is the NVFP4 floor
    return None


def annotate(rows, peer_prefix):
    """Adds _speedup (best peer µs / µs at the same shape and T) and _pct_nvfp4 to measured rows."""
    best = {}
    for r in rows:
        if measured(r) and r["runner"].startswith(peer_prefix):
            key = (r["shape"], r["tokens"])
            best[key] = min(best.get(key, float("inf")), r["us"])
    for r in rows:
        r["_speedup"] = r["_pct_nvfp4"] = None
        if not measured(r):
            continue
        peer = best.get((r["shape"], r["tokens"]))
        if peer is not None:
            r["_speedup"] = peer / r["us"]
        fl = nvfp4_floor_us(r)
        if fl is not None:
            r["_pct_nvfp4"] = 100.0 * fl / r["us"]
    return bool(best)


def fmt(v, spec, suffix=""):
    return "" if v is None else format(v, spec) + suffix


def markdown(sources, rows, peer_prefix, have_peer):
    shapes = sorted({r["shape"] for r in rows})
    multi_shape = len(shapes) > 1
    out = [f"# bench moe, joined: {', '.join(shapes)}", "", "Sources:", ""]
    for s in sources:
        m = s["meta"]
        out.append(f'{s["index"]}. `{s["path"]}`: {m.get("device", "?")}; date {m.get("date", "?")}; '
                   f'commit {m.get("commit") or "?"}' + (f'; torch {m["torch"]}' if m.get("torch") else ""))
        out.append(f'   - shape: {m.get("shape", "?")} ({m.get("desc", "?")})')
        out.append(f'   - measured floor: bandwidth {m.get("bandwidth_gbps", 0):.1f} GB/s'
                   + (f' ({m["bandwidth_kind"]})' if m.get("bandwidth_kind") else "")
                   + f', peak {m.get("peak_tflops", 0):.3f} TFLOP/s ({m.get("peak_kind", "?")})')
        if m.get("pool"):
            out.append(f'   - weight pool: {m["pool"]}')
        out.append(f'   - command: `{m.get("command", "?")}`')
    out += ["",
            "% floor: against the row's own bytes (bf16 weights for the peer) at its run's measured ceilings. "
            "% NVFP4 floor: against the floor of the same block with NVFP4 weights (the peer's `nvfp4_floor_us`; "
            "for NVFP4 runners their own floor). "
            + (f"Speedup: the fastest `{peer_prefix}*` row's µs at the same shape and T over the row's µs."
               if have_peer else f"No `{peer_prefix}*` rows: no speedup column values."),
            ""]
    head = (["shape"] if multi_shape else []) + ["src", "runner", "tactic", "T", "µs", "GB/s", "% floor",
                                                 "% NVFP4 floor", "speedup vs peer"]
    align = (["---"] if multi_shape else []) + ["---:", "---", "---", "---:", "---:", "---:", "---:", "---:", "---:"]
    out += ["| " + " | ".join(head) + " |", "|" + "|".join(align) + "|"]
    for r in sorted(rows, key=lambda r: (r["shape"], r["tokens"], r["_src"], r["_order"])):
        lead = ([r["shape"]] if multi_shape else []) + [str(r["_src"]), r["runner"], r.get("tactic", ""),
                                                        str(r["tokens"])]
        if not measured(r):
            cells = lead + [f'skipped: {r.get("skipped", "no time")}', "", "", "", ""]
        else:
            cells = lead + [f'{r["us"]:.1f}', fmt(r.get("gbps"), ".1f"), fmt(r.get("pct_floor"), ".1f"),
                            fmt(r["_pct_nvfp4"], ".1f"), fmt(r["_speedup"], ".2f", "x")]
        if r.get("fallback"):
            cells[len(lead) - 2] += f' ({r["fallback"]})'
        out.append("| " + " | ".join(c.replace("|", "\\|") for c in cells) + " |")
    return "\n".join(out) + "\n"


def best_per_runner(rows):
    """Per (source, shape, runner, T) only the fastest measured row: one line per runner in the plot."""
    best = {}
    for r in rows:
        if not measured(r):
            continue
        key = (r["_src"], r["shape"], r["runner"], r["tokens"])
        if key not in best or r["us"] < best[key]["us"]:
            best[key] = r
    out = []
    for r in best.values():
        r = dict(r)
        if r["runner"] != "auto" and not r["runner"].startswith("torch."):
            r["tactic_id"] = 0  # series_name: the runner alone
        out.append(r)
    return out


def plot(sources, rows, path):
    try:
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError as e:
        print(f"join.py: matplotlib is not importable ({e}); skipping --plot {path}", file=sys.stderr)
        return False
    names = {}
    for r in rows:
        if measured(r):
            names.setdefault((r["shape"], series_name(r)), set()).add(r["_src"])
    shapes = sorted({k[0] for k in names})
    if not shapes:
        print(f"join.py: no measured rows; skipping --plot {path}", file=sys.stderr)
        return False
    series = {}  # shape -> label -> rows
    for r in rows:
        if not measured(r):
            continue
        key = (r["shape"], series_name(r))
        label = key[1] if len(names[key]) == 1 else f'[{r["_src"]}] {key[1]}'
        series.setdefault(r["shape"], {}).setdefault(label, []).append(r)
    with_nv = any(r["_pct_nvfp4"] is not None for r in rows if measured(r))
    panels = 3 if with_nv else 2
    fig, axes = plt.subplots(len(shapes), panels, figsize=(6 * panels, 4.6 * len(shapes)), squeeze=False)
    colors = plt.get_cmap("tab20").colors
    ylabels = ["µs per MoE block", "% of own measured floor", "% of the NVFP4 floor"]
    for row_axes, shape in zip(axes, shapes):
        for k, (label, pts) in enumerate(sorted(series[shape].items())):
            pts.sort(key=lambda r: r["tokens"])
            t = [r["tokens"] for r in pts]
            runner = pts[0]["runner"]
            style = dict(linestyle="--" if runner == "auto" else (":" if runner.startswith("torch.") else "-"),
                         marker="o", color=colors[k % len(colors)], label=label)
            row_axes[0].plot(t, [r["us"] for r in pts], **style)
            row_axes[1].plot(t, [r.get("pct_floor") or 0 for r in pts], **style)
            nv = [(r["tokens"], r["_pct_nvfp4"]) for r in pts if r["_pct_nvfp4"] is not None]
            if with_nv and nv:
                row_axes[2].plot([a for a, _ in nv], [b for _, b in nv], **style)
        for a, ylabel in zip(row_axes, ylabels):
            a.set_xscale("log", base=2)
            a.set_xlabel("tokens T")
            a.set_ylabel(ylabel)
            a.set_title(shape, fontsize=9)
            a.grid(True, which="both", alpha=0.3)
        row_axes[0].set_yscale("log")
        for a in row_axes[1:]:
            a.set_ylim(bottom=0)
        row_axes[-1].legend(fontsize=7)
    devices = sorted({s["meta"].get("device", "?") for s in sources})
    fig.suptitle(f'bench moe on {"; ".join(devices)}: floor = max(bytes / bandwidth, flops / peak), '
                 f'each run\'s own measured ceilings', fontsize=10)
    fig.tight_layout(rect=(0, 0, 1, 1 - 0.45 / fig.get_figheight()))  # room for the title
    fig.savefig(path, dpi=110)
    plt.close(fig)
    return True


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("json", nargs="+", help="bench moe JSON files (ours and the peer's)")
    ap.add_argument("--md", required=True, help="markdown output")
    ap.add_argument("--plot", help="plot output (.png, .svg, .pdf); needs matplotlib")
    ap.add_argument("--peer", default="torch.", help="runner-name prefix of the peer rows (default: %(default)s)")
    ap.add_argument("--best-per-runner", action="store_true",
                    help="plot one line per runner (its fastest tactic at each T) instead of one per tactic")
    args = ap.parse_args(argv)
    sources, rows = load(args.json)
    have_peer = annotate(rows, args.peer)
    text = markdown(sources, rows, args.peer, have_peer)
    os.makedirs(os.path.dirname(os.path.abspath(args.md)), exist_ok=True)
    with open(args.md, "w") as f:
        f.write(text)
    print(f"join.py: {len(rows)} rows from {len(sources)} files -> {args.md}")
    if args.plot:
        if plot(sources, best_per_runner(rows) if args.best_per_runner else rows, args.plot):
            print(f"join.py: plot -> {args.plot}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
