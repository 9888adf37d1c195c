#!/usr/bin/env bash
# s27 call 1: the GPU tests of this tree (one-launch routing removed; route_token rewritten), then why deepseek-v3's
# routing got slower with the rewrite (s25 call 6: T = 1 / 8 14.5 / 20.3 us against 13.2 / 16.9 before it).
# .device/m = this tree (fp4moe, test_cuda); .device/x = the same + rt-flags.patch (FP4MOE_RT_FLAGS bits: 1 = the
# group stage through shared memory, 2 = the old argmax (redux min over candidates), 4 = 1024 threads at T <= 8;
# FP4MOE_ROUTING_ONLY stops the layer after routing); .device/o = 83972f8 + routing-only.patch (s25).
# Routing alone, T = 1, 2, 4, 8, three interleaved rounds.
set -u
export LD_LIBRARY_PATH=$PWD/.device/lib
E=bench/results/h200/experiments/2026-12-04-s27
o=$OUT/r; mkdir -p $o
timeout 260 .device/m/test_cuda > $o/gpu_test.log 2>&1; echo "test_cuda rc=$?"
grep -E "^\[  (PASSED|FAILED)|tests ran|Failure" $o/gpu_test.log | head -20
T1='nt=1 ksplit=2 bulk 2x4 ksteps, down ksplit=1'
one() { # label binary flags
  local j=$o/$s-$1-r$round.json
  FP4MOE_ROUTING_ONLY=1 FP4MOE_RT_FLAGS=$3 timeout 60 .device/$2/fp4moe bench moe --device cuda --shape $s \
    --tokens 1,2,4,8 --runners cuda.decode --no-auto --tactics "$T1" --json $j > /dev/null 2>&1
  echo "$s $1 r$round $(python3 $E/best.py $j 2>&1 | tail -1)"
}
for round in 1 2 3; do
  s=deepseek-v3
  one old o 0
  for f in 0 1 2 3 4 5 6 7; do one f$f x $f; done
  for s in glm-4.5-air qwen3-30b-a3b; do
    one old o 0
    for f in 0 2 4 6; do one f$f x $f; done
  done
done
cd $OUT && tar czf r.tgz r && rm -rf r
