#!/usr/bin/env bash
# s39 call 3: the acceptance run of main (7b6b51a, the register-3 multiply layout: .device/n = fp4moe and test_cuda built from main, carried as .device/pack.tar.xz;
# unpack first) on whatever card is lent: scripts/gpu_bench.sh (every tactic, auto, the torch peer,
# joined tables) into $OUT/r/<card>, then every GPU test, then one round of call 2's A/B (.device/m = 92846c2, the
# layout before) on this card.
set -u
export LD_LIBRARY_PATH=$PWD/.device/lib
name=$(nvidia-smi --query-gpu=name --format=csv,noheader | head -1); echo "$name"
case $name in *H200*) card=h200 ;; *) echo "not an H200: main's H100 figures are call 2b's (bench/results/h100); stopping"; exit 3 ;; esac
o=$OUT/r/$card; mkdir -p $o
FP4MOE=$PWD/.device/n/fp4moe timeout 330 bash scripts/gpu_bench.sh $o 1,4,16,64 > $o/decode-run.log 2>&1; echo "bench rc=$?"
python3 bench/results/h200/experiments/2026-12-05-s30/table.py $o
timeout 220 .device/n/test_cuda > $o/gpu_test.log 2>&1; echo "test_cuda rc=$?"
grep -E "^\[  (PASSED|FAILED)|tests ran|FAILED|^\[==========\]" $o/gpu_test.log | head -20
for b in m n; do
  for s in glm-4.5-air deepseek-v3 qwen3-30b-a3b; do
    timeout 60 .device/$b/fp4moe bench moe --device cuda --shape $s --tokens 1,4,16,64 --runners cuda.decode \
      --json $o/ab-$b-$s-1.json > $o/ab-$b-$s-1.txt 2>&1 || echo "bench $b $s failed"
  done
done
python3 - $o <<'PY'
import json, sys, collections
o = sys.argv[1]
for s in ('glm-4.5-air', 'deepseek-v3', 'qwen3-30b-a3b'):
    rows = {b: json.load(open(f'{o}/ab-{b}-{s}-1.json'))['rows'] for b in 'mn'}
    for t in (1, 4, 16, 64):
        best = {b: min(r['us'] for r in rows[b] if r['tokens'] == t) for b in 'mn'}
        auto = {b: [round(r['us'], 1) for r in rows[b] if r['tokens'] == t and r['runner'] == 'auto'] for b in 'mn'}
        print(f"{s} {t} | best {best['m']:.1f} -> {best['n']:.1f} ({(best['m'] / best['n'] - 1) * 100:+.1f} %) | auto {auto['m']} -> {auto['n']}")
PY
cd $OUT && tar czf r.tgz r && rm -rf r
