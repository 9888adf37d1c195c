#!/usr/bin/env bash
# s36 call 10: the layer with and without programmatic dependent launch. .device/n = main + FP4MOE_PDL (an experiment
# switch in pdl.cuh: 0 launches every kernel of the layer without programmatic stream serialization, so the stream
# orders them and griddepcontrol.wait returns at once). stream_pattern (call 9) read the T = 1 layer's two weight
# streams without math at 39.2 us chained with PDL and 31.4 us without (glm-4.5-air). n's decode and routing GPU
# tests with PDL off, then every tactic, T = 1, 4, 16, 64, PDL on / off interleaved, two rounds; pertac.py.
set -u
export LD_LIBRARY_PATH=$PWD/.device/lib
nvidia-smi --query-gpu=name --format=csv,noheader | head -1
o=$OUT/r; mkdir -p $o
FP4MOE_PDL=0 timeout 150 .device/n/test_cuda --gtest_filter='*Decode*:*MoeRoute*' > $o/gpu_test-nopdl.log 2>&1; echo "test_cuda (PDL off) rc=$?"
grep -E "^\[  (PASSED|FAILED)|tests ran|Failure|FAILED" $o/gpu_test-nopdl.log | head -20
for r in 1 2; do for s in glm-4.5-air deepseek-v3 qwen3-30b-a3b; do for p in 1 0; do
  FP4MOE_PDL=$p timeout 100 .device/n/fp4moe bench moe --device cuda --shape $s --tokens 1,4,16,64 --runners cuda.decode \
    --no-auto --json $o/pdl$p-$s-r$r.json > $o/pdl$p-$s-r$r.txt 2>&1 || echo "bench pdl=$p $s r$r failed"
done; done; done
for s in glm-4.5-air deepseek-v3 qwen3-30b-a3b; do for p in 1 0; do
  echo "== $s PDL=$p (best per T)"
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
