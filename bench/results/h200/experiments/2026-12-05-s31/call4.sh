#!/usr/bin/env bash
# s31 call 4: call 3's early experts lost (slower at T <= 8 in most rows, +21 us at glm-4.5-air T = 8 with the
# 6-CTA tactic). A guess why: every gate_up CTA's warp 0 spins on the token count from the moment it is resident
# (while the router logits still run), taking issue slots from the logits and routing CTAs on the same SMs and
# hammering one L2 line that routing's atomics need. Same build plus a back-off in the poll
# (FP4MOE_EXP_EARLY_SLEEP=ns, __nanosleep per poll). Modes: off, spin (call 3), 100 ns, 500 ns; two rounds.
set -u
export LD_LIBRARY_PATH=$PWD/.device/lib
o=$OUT/r; mkdir -p $o
nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.mem --format=csv,noheader
FP4MOE_EXP_EARLY_SLEEP=100 timeout 60 .device/n/test_cuda --gtest_filter='Decode*' > $o/test-decode.log 2>&1; echo "decode tests rc=$?"
grep -E "^\[  (PASSED|FAILED)|tests ran|Failure|FAILED" $o/test-decode.log | head -10
F='down ksplit=1, 3 CTAs per SM, 8 warps|ksplit=2 bulk 2x4 ksteps, down ksplit=1, 2 tiles per warp, combine kernel|nt=1 ksplit=1 bulk 2x4 ksteps, combine kernel|ksplit=4 bulk 2x4 ksteps, down ksplit=1, 6 CTAs|2 tiles per warp, 2 CTAs per SM, combine kernel, 8 warps|nt=1 ksplit=1 bulk 2x4 ksteps, 2 tiles per warp, combine kernel'
for r in 1 2; do for s in glm-4.5-air qwen3-30b-a3b deepseek-v3; do for m in off spin s100 s500; do
  [ $SECONDS -gt 300 ] && { echo "out of time: stop before $m $s r$r"; break 3; }
  v=0; [ $m = off ] && v=1
  sl=0; [ $m = s100 ] && sl=100; [ $m = s500 ] && sl=500
  FP4MOE_EXP_NO_EARLY=$v FP4MOE_EXP_EARLY_SLEEP=$sl timeout 60 .device/n/fp4moe bench moe --device cuda --shape $s --tokens 1,2,4,8 \
    --runners cuda.decode --no-auto --tactics "$F" --json $o/$m-$s-r$r.json > $o/$m-$s-r$r.txt 2>&1 || echo "bench $m $s r$r failed"
done; echo "$(date +%T) $s r$r"; done; done
for s in glm-4.5-air qwen3-30b-a3b deepseek-v3; do for m in off spin s100 s500; do
  echo "== $s $m"; python3 bench/results/h200/experiments/2026-12-05-s29/pertac.py $o/$m-$s-r*.json
done; done
cd $OUT && tar czf r.tgz r && rm -rf r
