#!/usr/bin/env bash
# s36 call 11: .device/n = main + two experiment switches in pdl.cuh (FP4MOE_PDL, FP4MOE_PDL_GU). Call 10 read the
# layer slower with no PDL at all; stream_pattern (call 9) had the T = 1 weight streams without math 8 us slower in a
# PDL chain than in plain stream order, the loss at the edges into a grid whose CTAs wait first (gate_up's). Here
# gate_up alone is launched in plain stream order (FP4MOE_PDL_GU=0), the other kernels with PDL: stream_pattern's
# chain modes (5 = that form), then every tactic, T = 1, 4, 16, 64, FP4MOE_PDL_GU 1 / 0 interleaved, two rounds.
set -u
export LD_LIBRARY_PATH=$PWD/.device/lib
nvidia-smi --query-gpu=name --format=csv,noheader | head -1
o=$OUT/r; mkdir -p $o
./.device/stream_pattern > $o/stream_pattern.txt 2>&1; sed -n "/PDL chain in a graph/,/one read kernel/p" $o/stream_pattern.txt | grep -E "glm|qwen"
for r in 1 2; do for s in glm-4.5-air deepseek-v3 qwen3-30b-a3b; do for p in 1 0; do
  FP4MOE_PDL_GU=$p timeout 100 .device/n/fp4moe bench moe --device cuda --shape $s --tokens 1,4,16,64 --runners cuda.decode \
    --no-auto --json $o/pdl$p-$s-r$r.json > $o/pdl$p-$s-r$r.txt 2>&1 || echo "bench pdl=$p $s r$r failed"
done; done; done
for s in glm-4.5-air deepseek-v3 qwen3-30b-a3b; do for p in 1 0; do
  echo "== $s PDL_GU=$p (best per T)"
  python3 - $o/pdl$p-$s-r*.json <<'PY'
import json, sys
best = {}
for f in sys.argv[1:]:
    for r in json.load(open(f))['rows']:
        t = r['tokens']
        if t not in best or r['us'] < best[t][0]: best[t] = (r['us'], r['pct_floor'], r['tactic'])
for t in sorted(best): print(t, '%.1f us %.1f %%' % best[t][:2], best[t][2])
PY
done; done
cd $OUT && tar czf r.tgz r && rm -rf r
