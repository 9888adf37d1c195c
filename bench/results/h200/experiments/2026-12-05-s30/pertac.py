# Lowest us per (tactic, T) over several bench moe JSON files: one line per tactic, "T:us ...".
import collections, json, sys
best = collections.defaultdict(dict)
for f in sys.argv[1:]:
    rows = json.load(open(f))
    rows = rows['rows'] if isinstance(rows, dict) else rows
    for r in rows:
        d = best[r.get('tactic', '')]
        d[r['tokens']] = min(d.get(r['tokens'], float('inf')), r['us'])
for tac, d in best.items():
    print(' '.join('%d:%.1f' % (t, d[t]) for t in sorted(d)), '|', tac)
