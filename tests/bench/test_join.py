#!/usr/bin/env python3
"""bench/join.py on committed bench moe JSON: the markdown has every row, the sources' meta and the speedup
over the peer where the peer has a row at the same T.

The peer file is derived from a committed CPU result (its cpu.fast tactic-0 rows renamed to the torch peer's
runner name, with an nvfp4_floor_us field): a format test, not a measurement. Standard library only; the
plot part runs when matplotlib is importable. Exit status: 0 pass, 1 fail.
"""
import argparse
import json
import os
import subprocess
import sys
import tempfile

PEER = "torch.grouped_mm.bf16"


def table_rows(md):
    """Cells of the markdown table's body rows."""
    lines = [l for l in md.splitlines() if l.startswith("|")]
    return [[c.strip() for c in l.strip("|").split(" | ")] for l in lines[2:]]


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--source-dir", default=os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", ".."))
    args, _ = ap.parse_known_args()  # --fp4moe and --build-dir are not needed
    src = os.path.abspath(args.source_dir)
    ours_path = os.path.join(src, "bench/results/cpu/glm-4.5-air.json")
    base_path = os.path.join(src, "bench/results/cpu-h200host/run1-after.json")
    with open(ours_path) as f:
        ours = json.load(f)
    with open(base_path) as f:
        base = json.load(f)
    peer = {"meta": dict(base["meta"], command="(derived from run1-after.json for tests/bench/test_join.py)"),
            "rows": []}
    for r in base["rows"]:
        if r["runner"] == "cpu.fast" and r["tactic_id"] == 0:
            peer["rows"].append(dict(r, runner=PEER, tactic="cuda-graph", nvfp4_floor_us=r["us"] / 2))

    failures = []

    def check(cond, what):
        if not cond:
            failures.append(what)

    with tempfile.TemporaryDirectory() as tmp:
        peer_path = os.path.join(tmp, "peer.json")
        with open(peer_path, "w") as f:
            json.dump(peer, f)
        md_path, plot_path = os.path.join(tmp, "joined.md"), os.path.join(tmp, "joined.svg")
        p = subprocess.run([sys.executable, os.path.join(src, "bench/join.py"), ours_path, peer_path, "--md", md_path,
                            "--plot", plot_path], capture_output=True, text=True)
        if p.returncode != 0:
            print(f"FAIL: join.py exited {p.returncode}\n{p.stdout}{p.stderr}")
            return 1
        with open(md_path) as f:
            md = f.read()
        try:
            import matplotlib  # noqa: F401

            check(os.path.getsize(plot_path) > 1000 if os.path.exists(plot_path) else False, "plot not written")
        except ImportError:
            check("skipping --plot" in p.stderr, "no message about the skipped plot")

        # --best-per-runner: one series per runner, each point its fastest measured row at that T.
        p2 = subprocess.run([sys.executable, os.path.join(src, "bench/join.py"), ours_path, peer_path, "--md",
                             md_path + ".2", "--plot", plot_path + ".2.svg", "--best-per-runner"],
                            capture_output=True, text=True)
        check(p2.returncode == 0, f"join.py --best-per-runner exited {p2.returncode}: {p2.stderr}")
        sys.path.insert(0, os.path.join(src, "bench"))
        import join

        _, all_rows = join.load([ours_path, peer_path])
        best = join.best_per_runner(all_rows)
        fastest = {}
        for r in all_rows:
            if join.measured(r):
                k = (r["_src"], r["shape"], r["runner"], r["tokens"])
                fastest[k] = min(fastest.get(k, float("inf")), r["us"])
        check(len(best) == len(fastest), f"best_per_runner: {len(best)} rows for {len(fastest)} (runner, T) keys")
        for r in best:
            k = (r["_src"], r["shape"], r["runner"], r["tokens"])
            check(r["us"] == fastest.get(k), f"best_per_runner kept {r['us']} for {k}, fastest {fastest.get(k)}")
        check(len({join.series_name(r) for r in best}) == len({(r["_src"], r["runner"]) for r in best}),
              "best_per_runner: more than one series per runner")

    # Meta of both sources.
    check(ours_path in md and peer_path in md, "source paths not listed")
    check(ours["meta"]["command"] in md, "our command line not listed")
    check(f'{ours["meta"]["bandwidth_gbps"]:.1f} GB/s' in md, "our measured bandwidth not listed")

    rows = table_rows(md)
    # header: src runner tactic T us GB/s %floor %nvfp4 speedup (one shape: no shape column)
    check(len(rows) == len(ours["rows"]) + len(peer["rows"]),
          f'{len(rows)} table rows for {len(ours["rows"])} + {len(peer["rows"])} input rows')
    check(all(len(c) == 9 for c in rows), "a table row does not have 9 cells")
    peer_us = {r["tokens"]: r["us"] for r in peer["rows"]}
    by_key = {}
    for c in rows:
        by_key.setdefault((c[0], c[1], c[2], int(c[3])), c)
    for r in ours["rows"]:
        c = by_key.get(("1", r["runner"], r["tactic"], r["tokens"]))
        if c is None:
            failures.append(f'no table row for {r["runner"]} [{r["tactic"]}] T={r["tokens"]}')
            continue
        if r.get("skipped"):
            check(c[4].startswith("skipped:"), f'skipped row T={r["tokens"]} {r["runner"]} not marked skipped')
            continue
        check(c[4] == f'{r["us"]:.1f}', f"us cell {c[4]!r} != {r['us']:.1f}")
        check(c[6] == f'{r["pct_floor"]:.1f}', f"% floor cell {c[6]!r}")
        check(c[7] == f'{r["pct_floor"]:.1f}', f"an NVFP4 runner's % NVFP4 floor {c[7]!r} is not its own % floor")
        want = f'{peer_us[r["tokens"]] / r["us"]:.2f}x' if r["tokens"] in peer_us else ""
        check(c[8] == want, f'speedup at T={r["tokens"]} {r["runner"]}#{r["tactic_id"]}: {c[8]!r}, expected {want!r}')
    for r in peer["rows"]:
        c = by_key.get(("2", PEER, "cuda-graph", r["tokens"]))
        check(c is not None and c[8] == "1.00x" and c[7] == "50.0",
              f'peer row T={r["tokens"]}: {c}')
    check(any(c[8] for c in rows) and any(not c[8] for c in rows), "speedup column all empty or all filled")

    if failures:
        print("FAIL:\n  " + "\n  ".join(failures))
        return 1
    print(f"ok: {len(rows)} rows joined")
    return 0


if __name__ == "__main__":
    sys.exit(main())
