# Best (lowest) us per token count of a bench moe JSON: "T:us ...".
import collections, json, sys
rows = json.load(open(sys.argv[1]))
rows = rows['rows'] if isinstance(rows, dict) else rows
best = collections.defaultdict(lambda: float('inf'))
for r in rows:
    best[r['tokens']] = min(best[r['tokens']], r['us'])
print(' '.join('%d:%.1f' % (t, best[t]) for t in sorted(best)))
