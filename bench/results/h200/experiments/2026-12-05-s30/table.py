# The acceptance table of ../../README.md from one gpu_bench.sh folder: per shape and T, the `auto` row, the
# fastest cuda.decode row of the same run, the torch peer, and auto's speedup over the peer.
#   python3 table.py DIR
import json, sys
d = sys.argv[1]
print('| shape | T | auto µs | auto % of floor | best listed µs (% of floor) | torch bf16 peer µs | auto speedup |')
print('|---|---:|---:|---:|---:|---:|---:|')
for s in ('glm-4.5-air', 'deepseek-v3', 'qwen3-30b-a3b'):
    rows = json.load(open(f'{d}/{s}.json'))['rows']
    peer = {r['tokens']: r for r in json.load(open(f'{d}/torch-{s}.json'))['rows']}
    for t in sorted({r['tokens'] for r in rows}):
        auto = [r for r in rows if r['tokens'] == t and r['runner'] == 'auto'][0]
        best = min((r for r in rows if r['tokens'] == t and r['runner'] == 'cuda.decode'), key=lambda r: r['us'])
        p = peer[t]['us']
        print(f"| {s} | {t} | {auto['us']:.1f} | {auto['pct_floor']:.1f} % | {best['us']:.1f} ({best['pct_floor']:.1f} %) "
              f"| {p:.1f} | {p / auto['us']:.2f}x |")
