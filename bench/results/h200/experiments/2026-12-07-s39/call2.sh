#!/usr/bin/env bash
# s39 call 2: the register-3 multiply layout (mma_pack: register 0 in place, 1 and 2 rotated by 10 and 13, register 3
# spread by one IMAD; 8 SASS ops per packed word against 11) against main, on whatever card is lent.
# .device/m = main (92846c2), .device/n = the new layout (same tree + mma_pack.cpp/h, mma_dequant.h, test_mma_pack.cpp);
# both fp4moe and test_cuda, carried as .device/pack.tar.xz (unpack first).
# 1. every GPU test with the new binary; 2. cuda.decode, every tactic + auto, T = 1/4/16/64, three shapes, main and new
# interleaved, two rounds; 3. cuda.grouped at T = 4096 (deepseek-v3, glm-4.5-air), main and new; 4. on an H200 only:
# scripts/gpu_bench.sh with the new binary (the acceptance form).
set -u
export LD_LIBRARY_PATH=$PWD/.device/lib
name=$(nvidia-smi --query-gpu=name --format=csv,noheader | head -1); echo "$name"
case $name in *H200*) card=h200 ;; *H100*) card=h100 ;; *) card=other ;; esac
o=$OUT/r/$card; mkdir -p $o
timeout 200 .device/n/test_cuda > $o/gpu_test.log 2>&1; echo "test_cuda rc=$?"
grep -E "^\[  (PASSED|FAILED)|tests ran|FAILED|Failure" $o/gpu_test.log | head -12
for round in 1 2; do
  for b in m n; do
    for s in glm-4.5-air deepseek-v3 qwen3-30b-a3b; do
      timeout 60 .device/$b/fp4moe bench moe --device cuda --shape $s --tokens 1,4,16,64 --runners cuda.decode \
        --json $o/ab-$b-$s-$round.json > $o/ab-$b-$s-$round.txt 2>&1 || echo "bench $b $s $round failed"
    done
  done
done
python3 - $o <<'PY'
import json, sys, glob, collections
o = sys.argv[1]
best = collections.defaultdict(lambda: 1e30); auto = collections.defaultdict(list); pct = {}
for f in glob.glob(o + '/ab-*.json'):
    b, s = f.split('/ab-')[1].split('-', 1)
    s = s.rsplit('-', 1)[0]
    for r in json.load(open(f))['rows']:
        k = (s, r['tokens'], b)
        best[k] = min(best[k], r['us'])
        if r['runner'] == 'auto': auto[k].append(round(r['us'], 1)); pct[k + (r['us'],)] = r['pct_floor']
print('shape T | main best, new best (us) | main auto rows, new auto rows')
for s in ('glm-4.5-air', 'deepseek-v3', 'qwen3-30b-a3b'):
    for t in (1, 4, 16, 64):
        m, n = best[(s, t, 'm')], best[(s, t, 'n')]
        print(f"{s} {t} | {m:.1f} {n:.1f} ({(m / n - 1) * 100:+.1f} %) | {auto[(s, t, 'm')]} {auto[(s, t, 'n')]}")
PY
for s in deepseek-v3 glm-4.5-air; do
  for b in m n; do
    timeout 60 .device/$b/fp4moe bench moe --device cuda --shape $s --tokens 4096 --runners cuda.grouped --tactics default --no-auto \
      --json $o/grouped-$b-$s.json > $o/grouped-$b-$s.txt 2>&1 || echo "grouped $b $s failed"
    python3 -c "import json,sys; r=json.load(open('$o/grouped-$b-$s.json'))['rows']; b=min(r,key=lambda x:x['us']); print('grouped $b $s', round(b['us'],1), b['pct_floor'], b['tactic'])" 2>&1 | tail -1
  done
done
if [ $card = h200 ]; then
  FP4MOE=$PWD/.device/n/fp4moe timeout 150 bash scripts/gpu_bench.sh $o/accept 1,4,16,64 > $o/accept-run.log 2>&1; echo "gpu_bench rc=$?"
  cat $o/accept/acceptance.md 2>/dev/null | tail -20
fi
cd $OUT && tar czf r.tgz r && rm -rf r
