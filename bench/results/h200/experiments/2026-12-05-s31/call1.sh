#!/usr/bin/env bash
# s31 call 1: down's warps prefetching the rest of their weights into L2 before they wait for gate_up (one
# cp.async.bulk.prefetch.L2 per tile for weights and one for scales, after the ring's first copies), so that down
# CTAs resident during gate_up's tail fill the HBM time that tail leaves idle. One build (.device/n: main + the
# experiment's env switch FP4MOE_EXP_DOWN_L2: 0 off, 1 every down CTA, 2 CTAs of the first wave only).
# Decode tests with the prefetch on, then per shape the three modes interleaved, two rounds, the tactics the H100's
# auto picked; pertac.py (s29's) per mode.
set -u
export LD_LIBRARY_PATH=$PWD/.device/lib
o=$OUT/r; mkdir -p $o
nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.mem --format=csv,noheader
FP4MOE_EXP_DOWN_L2=1 timeout 100 .device/n/test_cuda --gtest_filter='Decode*' > $o/test-l2.log 2>&1; echo "decode tests (mode 1) rc=$?"
grep -E "^\[  (PASSED|FAILED)|tests ran|Failure|FAILED" $o/test-l2.log | head -10
F='down ksplit=1, 3 CTAs per SM, 8 warps|ksplit=2 bulk 2x4 ksteps, down ksplit=1, 2 tiles per warp, combine kernel|nt=1 ksplit=1 bulk 2x4 ksteps, combine kernel|ksplit=4 bulk 2x4 ksteps, down ksplit=1, 6 CTAs|2 tiles per warp, 2 CTAs per SM, combine kernel, 8 warps|nt=1 ksplit=1 bulk 2x4 ksteps, 2 tiles per warp, combine kernel'
for r in 1 2; do for s in glm-4.5-air qwen3-30b-a3b deepseek-v3; do for m in 0 1 2; do
  [ $SECONDS -gt 480 ] && { echo "out of time: stop before m$m $s r$r"; break 3; }
  FP4MOE_EXP_DOWN_L2=$m timeout 70 .device/n/fp4moe bench moe --device cuda --shape $s --tokens 1,4,16,64 \
    --runners cuda.decode --no-auto --tactics "$F" --json $o/m$m-$s-r$r.json > $o/m$m-$s-r$r.txt 2>&1 || echo "bench m$m $s r$r failed"
  echo "$(date +%T) m$m $s r$r"
done; done; done
for s in glm-4.5-air qwen3-30b-a3b deepseek-v3; do for m in 0 1 2; do
  echo "== $s mode $m"; python3 bench/results/h200/experiments/2026-12-05-s29/pertac.py $o/m$m-$s-r*.json
done; done
cd $OUT && tar czf r.tgz r && rm -rf r
