# Lowest us per T of a bench moe JSON, for tactics whose name contains argv[2] and for the others: "T:with/without".
import collections, json, sys
rows = json.load(open(sys.argv[1]))
rows = rows['rows'] if isinstance(rows, dict) else rows
a, b = collections.defaultdict(lambda: float('inf')), collections.defaultdict(lambda: float('inf'))
for r in rows:
    d = a if sys.argv[2] in r.get('tactic', '') else b
    d[r['tokens']] = min(d[r['tokens']], r['us'])
print(' '.join('%d:%.1f/%.1f' % (t, a[t], b[t]) for t in sorted(set(a) | set(b))))
