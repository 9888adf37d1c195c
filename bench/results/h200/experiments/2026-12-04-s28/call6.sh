#!/usr/bin/env bash
# s28 call 6: gate_up issuing its first ring stage alone (the rest once it lands) as the default (.device/n, the
# working tree) against main b690528 (.device/m): every GPU test on n; the tactic sets of call 3 (best row per T),
# three interleaved rounds; then the landing check: bench moe auto rows of the three shapes on n.
set -u
export LD_LIBRARY_PATH=$PWD/.device/lib
E=bench/results/h200/experiments/2026-12-04-s28
o=$OUT/r; mkdir -p $o
timeout 300 .device/n/test_cuda > $o/gpu_test.log 2>&1; echo "test_cuda rc=$?"
grep -E "^\[  (PASSED|FAILED)|tests ran|FAILED" $o/gpu_test.log | head -20
declare -A TAC=(
  [glm-4.5-air]='nt=1 ksplit=2 bulk 2x4 ksteps, down ksplit=1|nt=1 ksplit=1 bulk 2x4 ksteps, 2 tiles per warp'
  [deepseek-v3]='nt=1 ksplit=2 bulk 2x4 ksteps, down ksplit=1|nt=1 ksplit=1 bulk 2x4 ksteps, 2 tiles per warp'
  [qwen3-30b-a3b]='nt=1 ksplit=4 bulk 2x4 ksteps, down ksplit=2, 6 CTAs|nt=1 ksplit=1 bulk 2x4 ksteps, combine kernel|nt=1 ksplit=1 bulk 2x4 ksteps, 2 tiles per warp, combine kernel')
for r in 1 2 3; do for s in glm-4.5-air deepseek-v3 qwen3-30b-a3b; do for b in m n; do
  j=$o/ab-$s-$b-r$r.json
  timeout 90 .device/$b/fp4moe bench moe --device cuda --shape $s --tokens 1,4,16,64 --runners cuda.decode \
    --no-auto --tactics "${TAC[$s]}" --json $j > /dev/null 2>&1
  echo "ab $s $b r$r $(python3 $E/best.py $j)"
done; done; done
for s in glm-4.5-air deepseek-v3 qwen3-30b-a3b; do
  timeout 120 .device/n/fp4moe bench moe --device cuda --shape $s --tokens 1,4,16,64 --json $o/$s.json --md $o/$s.md > $o/$s.txt 2>&1; echo "$s rc=$?"
  grep "^auto" $o/$s.txt
done
cd $OUT && tar czf r.tgz r && rm -rf r
