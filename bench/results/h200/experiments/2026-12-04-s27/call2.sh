#!/usr/bin/env bash
# s27 call 2: the landing check of the routing rewrite as it lands (.device/m: route_token with the redux-min argmax
# and the shared-memory group stage, unrolled softmax exps, the weight sum inside the rounds; a 256-thread top-k +
# plan CTA up to T = 8; 32-bit mask atomics; one-launch routing removed): every GPU test; routing alone, this tree
# + routing-only.patch (.device/n) against 83972f8 + routing-only.patch (.device/o), T = 1, 2, 4, 8, 16, 64, three
# interleaved rounds; then bench moe with auto at T = 1, 4, 16, 64 for the three shapes (no peer: device time).
set -u
export LD_LIBRARY_PATH=$PWD/.device/lib
E=bench/results/h200/experiments/2026-12-04-s27
o=$OUT/r; mkdir -p $o
timeout 260 .device/m/test_cuda > $o/gpu_test.log 2>&1; echo "test_cuda rc=$?"
grep -E "^\[  (PASSED|FAILED)|tests ran|Failure" $o/gpu_test.log | head -20
T1='nt=1 ksplit=2 bulk 2x4 ksteps, down ksplit=1'
for round in 1 2 3; do for s in deepseek-v3 glm-4.5-air qwen3-30b-a3b; do for b in o n; do
  j=$o/routing-$s-$b-r$round.json
  FP4MOE_ROUTING_ONLY=1 timeout 60 .device/$b/fp4moe bench moe --device cuda --shape $s --tokens 1,2,4,8,16,64 \
    --runners cuda.decode --no-auto --tactics "$T1" --json $j > /dev/null 2>&1
  echo "routing $s $b r$round $(python3 $E/best.py $j 2>&1 | tail -1)"
done; done; done
for s in glm-4.5-air deepseek-v3 qwen3-30b-a3b; do
  timeout 90 .device/m/fp4moe bench moe --device cuda --shape $s --tokens 1,4,16,64 --json $o/$s.json --md $o/$s.md > $o/$s.txt 2>&1; echo "$s rc=$?"
  grep "^auto" $o/$s.txt
done
cd $OUT && tar czf r.tgz r && rm -rf r
