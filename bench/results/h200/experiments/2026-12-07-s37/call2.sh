#!/usr/bin/env bash
# s37 call 2 (call 1 never got a machine): down by rows (decode_tactic::down_rows) at T <= 8, and the landing check in
# one call. .device/r1 = main (1683086) + the rows kernel, ten tactics and the LongIntermediate test; harness = a
# review's standalone check (each rows tactic against its base tactic, I up to 1536, T = 1..8, both layouts, a refused
# token, run twice for determinism). Then test_cuda without the cuda.grouped suites (unchanged), then
# scripts/gpu_bench.sh (every tactic, auto, the torch peer) at T = 1, 4, 16, 64; best plain vs best rows row per T.
set -u
export LD_LIBRARY_PATH=$PWD/.device/lib
name=$(nvidia-smi --query-gpu=name --format=csv,noheader | head -1); echo "$name"
case $name in *H200*) card=h200 ;; *H100*) card=h100 ;; *) card=other ;; esac
o=$OUT/r/$card; mkdir -p $o
timeout 40 .device/r1/harness > $o/harness.log 2>&1; echo "harness rc=$?"; grep -c "^ok" $o/harness.log; grep -E "FAIL|fails" $o/harness.log | head -5
timeout 90 .device/r1/test_cuda --gtest_filter='*Decode*:*MoeRoute*' > $o/gpu_test.log 2>&1; echo "test_cuda rc=$?"
grep -E "^\[  (PASSED|FAILED)|tests ran|FAILED|Failure" $o/gpu_test.log | head -12
FP4MOE=$PWD/.device/r1/fp4moe timeout 280 bash scripts/gpu_bench.sh $o 1,4,16,64 > $o/decode-run.log 2>&1; echo "bench rc=$?"
python3 bench/results/h200/experiments/2026-12-05-s30/table.py $o
for s in glm-4.5-air deepseek-v3 qwen3-30b-a3b; do
  echo "== $s"
  python3 - $o/$s.json <<'PY'
import json, sys
best = {}
for r in json.load(open(sys.argv[1]))['rows']:
    if r['tokens'] > 8 or r['runner'] not in ('auto', 'cuda.decode'): continue
    key = (r['tokens'], 'auto' if r['runner'] == 'auto' else 'rows' if 'down by rows' in r['tactic'] else 'plain')
    if key not in best or r['us'] < best[key][0]: best[key] = (r['us'], r['pct_floor'], r['tactic'])
for k in sorted(best): print(k[0], k[1], '%.1f us %.1f %%' % best[k][:2], best[k][2])
PY
done
cd $OUT && tar czf r.tgz r && rm -rf r
