#!/usr/bin/env bash
# s27 call 4: the shared experts' gate_up groups started before routing ends (their groups first, rows = tokens,
# no griddepcontrol.wait; NOTES "Next for issue 4" item 2). .device/m = that tree (fp4moe, test_cuda),
# .device/o = 3e2e398 (main before it). Every GPU test; then the whole layer, old vs new, glm-4.5-air and
# deepseek-v3 (qwen3-30b-a3b has no shared expert), three interleaved rounds, one tactic per T range; then
# bench moe with auto at T = 1, 4, 16, 64 for the three shapes with the new build.
set -u
export LD_LIBRARY_PATH=$PWD/.device/lib
E=bench/results/h200/experiments/2026-12-04-s27
o=$OUT/r; mkdir -p $o
timeout 260 .device/m/test_cuda > $o/gpu_test.log 2>&1; echo "test_cuda rc=$?"
grep -E "^\[  (PASSED|FAILED)|tests ran|Failure" $o/gpu_test.log | head -20
T1='nt=1 ksplit=2 bulk 2x4 ksteps, down ksplit=1'
T64='nt=1 ksplit=1 bulk 2x4 ksteps, 2 tiles per warp, combine kernel'
for round in 1 2 3; do for s in glm-4.5-air deepseek-v3; do for b in o m; do
  j=$o/small-$s-$b-r$round.json
  timeout 60 .device/$b/fp4moe bench moe --device cuda --shape $s --tokens 1,2,4,8 --runners cuda.decode --no-auto \
    --tactics "$T1" --json $j > /dev/null 2>&1
  k=$o/big-$s-$b-r$round.json
  timeout 60 .device/$b/fp4moe bench moe --device cuda --shape $s --tokens 16,64 --runners cuda.decode --no-auto \
    --tactics "$T64" --json $k > /dev/null 2>&1
  echo "layer $s $b r$round $(python3 $E/best.py $j 2>&1 | tail -1) $(python3 $E/best.py $k 2>&1 | tail -1)"
done; done; done
for s in glm-4.5-air deepseek-v3 qwen3-30b-a3b; do
  timeout 90 .device/m/fp4moe bench moe --device cuda --shape $s --tokens 1,4,16,64 --json $o/$s.json --md $o/$s.md > $o/$s.txt 2>&1; echo "$s rc=$?"
  grep "^auto" $o/$s.txt
done
cd $OUT && tar czf r.tgz r && rm -rf r
