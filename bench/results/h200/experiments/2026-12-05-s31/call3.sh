#!/usr/bin/env bash
# s31 call 3: early experts. The routing kernel publishes the batch's experts (a bitmask and a token count) right
# after each token's top-k, and gate_up's CTAs at T <= 8 issue their first weight copies from it before the plan
# is complete, checking the guess against the plan afterwards. One build (.device/n: the experiment with its env
# switch FP4MOE_EXP_NO_EARLY=1: off). Decode tests (with the new hint test: right, wrong, stale, missing hints),
# then per shape the two modes interleaved, three rounds, T = 1, 2, 4, 8 and 16 (control: no early path there),
# the six tactics the H100's auto picked; pertac.py (s29's) per mode.
set -u
export LD_LIBRARY_PATH=$PWD/.device/lib
o=$OUT/r; mkdir -p $o
nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.mem --format=csv,noheader
timeout 150 .device/n/test_cuda --gtest_filter='Decode*' > $o/test-decode.log 2>&1; echo "decode tests rc=$?"
grep -E "^\[  (PASSED|FAILED)|tests ran|Failure|FAILED" $o/test-decode.log | head -10
F='down ksplit=1, 3 CTAs per SM, 8 warps|ksplit=2 bulk 2x4 ksteps, down ksplit=1, 2 tiles per warp, combine kernel|nt=1 ksplit=1 bulk 2x4 ksteps, combine kernel|ksplit=4 bulk 2x4 ksteps, down ksplit=1, 6 CTAs|2 tiles per warp, 2 CTAs per SM, combine kernel, 8 warps|nt=1 ksplit=1 bulk 2x4 ksteps, 2 tiles per warp, combine kernel'
for r in 1 2 3; do for s in glm-4.5-air qwen3-30b-a3b deepseek-v3; do for m in early off; do
  [ $SECONDS -gt 420 ] && { echo "out of time: stop before $m $s r$r"; break 3; }
  v=0; [ $m = off ] && v=1
  FP4MOE_EXP_NO_EARLY=$v timeout 70 .device/n/fp4moe bench moe --device cuda --shape $s --tokens 1,2,4,8,16 \
    --runners cuda.decode --no-auto --tactics "$F" --json $o/$m-$s-r$r.json > $o/$m-$s-r$r.txt 2>&1 || echo "bench $m $s r$r failed"
  echo "$(date +%T) $m $s r$r"
done; done; done
for s in glm-4.5-air qwen3-30b-a3b deepseek-v3; do for m in off early; do
  echo "== $s $m"; python3 bench/results/h200/experiments/2026-12-05-s29/pertac.py $o/$m-$s-r*.json
done; done
cd $OUT && tar czf r.tgz r && rm -rf r
