"""Best row and auto rows per (shape, T) of two binaries' `bench moe` JSON (ab-<bin>-<shape>-<round>.json)."""
import collections, glob, json, sys
o, a, b = sys.argv[1:4]
best = collections.defaultdict(lambda: float('inf'))
auto = collections.defaultdict(list)
for f in glob.glob(o + '/ab-*.json'):
    binary, rest = f.split('/ab-')[1].split('-', 1)
    shape = rest.rsplit('-', 1)[0]
    for r in json.load(open(f))['rows']:
        k = (shape, r['tokens'], binary)
        best[k] = min(best[k], r['us'])
        if r['runner'] == 'auto':
            auto[k].append(round(r['us'], 1))
print(f'shape T | best {a} / {b} (us) | auto rows {a} / {b}')
for s in ('glm-4.5-air', 'deepseek-v3', 'qwen3-30b-a3b'):
    for t in (1, 4, 16, 64):
        x, y = best[(s, t, a)], best[(s, t, b)]
        print(f'{s} {t} | {x:.1f} {y:.1f} ({(x / y - 1) * 100:+.1f} %) | {auto[(s, t, a)]} {auto[(s, t, b)]}')
