#!/usr/bin/env bash
# s39 call 3, on whatever card is lent. Binaries (carried as .device/pack.tar.xz; unpack first):
#   (.device/m = 92846c2, the shifts-only layout, was dropped from the pack: no A/B against it fits the budget left)
#   .device/n = main at 7b6b51a (the register-3 multiply layout, 786d02b),
#   .device/w = n + wide.patch (registers 1 and 2 rotated by one IMAD.WIDE on the FMA pipe instead of a funnel shift on
#   the ALU pipe; same layout, same instruction count, 32 ALU ops per 4-step chunk fewer).
# H200: main's acceptance run (scripts/gpu_bench.sh with n), test_cuda (n), one round of the A/B n / w (cuda.decode,
# every tactic + auto, T = 1/4/16/64, three shapes), test_cuda's decode and grouped suites with w.
# Files stay under $OUT/r (no tarball at the end), so a run cut short by the device budget still returns what it wrote.
# Other cards: the A/B n / w, twice, interleaved, then w's tests.
set -u
export LD_LIBRARY_PATH=$PWD/.device/lib
name=$(nvidia-smi --query-gpu=name --format=csv,noheader | head -1); echo "$name"
case $name in *H200*) card=h200 ;; *H100*) card=h100 ;; *) card=other ;; esac
o=$OUT/r/$card; mkdir -p $o
ab() { # binary round
  for s in glm-4.5-air deepseek-v3 qwen3-30b-a3b; do
    timeout 60 .device/$1/fp4moe bench moe --device cuda --shape $s --tokens 1,4,16,64 --runners cuda.decode \
      --json $o/ab-$1-$s-$2.json > $o/ab-$1-$s-$2.txt 2>&1 || echo "bench $1 $s $2 failed"
  done
}
if [ $card = h200 ]; then
  FP4MOE=$PWD/.device/n/fp4moe timeout 200 bash scripts/gpu_bench.sh $o/accept 1,4,16,64 > $o/accept-run.log 2>&1; echo "gpu_bench rc=$?"
  python3 bench/results/h200/experiments/2026-12-05-s30/table.py $o/accept
  tail -2 $o/accept/acceptance.md
  timeout 200 .device/n/test_cuda > $o/gpu_test.log 2>&1; echo "test_cuda rc=$?"
  grep -E "^\[  (PASSED|FAILED)|FAILED" $o/gpu_test.log | head -8
  ab n 1; ab w 1
else
  ab n 1; ab w 1; ab w 2; ab n 2
fi
python3 - $o <<'PY'
import json, sys, glob, collections
o = sys.argv[1]
best = collections.defaultdict(lambda: 1e30); auto = collections.defaultdict(list)
for f in glob.glob(o + '/ab-*.json'):
    b, rest = f.split('/ab-')[1].split('-', 1)
    s = rest.rsplit('-', 1)[0]
    for r in json.load(open(f))['rows']:
        k = (s, r['tokens'], b)
        best[k] = min(best[k], r['us'])
        if r['runner'] == 'auto': auto[k].append(round(r['us'], 1))
print('shape T | best m / n / w (us) | auto rows m / n / w')
for s in ('glm-4.5-air', 'deepseek-v3', 'qwen3-30b-a3b'):
    for t in (1, 4, 16, 64):
        m, n, w = (best.get((s, t, b), float('nan')) for b in 'mnw')
        print(f"{s} {t} | {m:.1f} {n:.1f} {w:.1f} (n/m {(m / n - 1) * 100:+.1f} %, w/n {(n / w - 1) * 100:+.1f} %) | {auto[(s, t, 'm')]} {auto[(s, t, 'n')]} {auto[(s, t, 'w')]}")
PY
timeout 120 .device/w/test_cuda --gtest_filter='*Decode*:*Grouped*' > $o/gpu_test-w.log 2>&1; echo "test_cuda w rc=$?"
grep -E "^\[  (PASSED|FAILED)|FAILED" $o/gpu_test-w.log | head -8
