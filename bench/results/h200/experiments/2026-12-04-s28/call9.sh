#!/usr/bin/env bash
# s28 call 9: queue3.patch (queue2 + each item's token rows cp.async-copied into shared memory when taken, counts and offsets in shared memory) (.device/q: the working tree, tactics "gate_up queue"): every GPU test, the
# queue kernel's resources, then per shape the s27 auto tactics against the queue tactics, T = 1, 4, 16, 64, two
# interleaved rounds (split.py: lowest us with "queue" / without).
set -u
export LD_LIBRARY_PATH=$PWD/.device/lib
E=bench/results/h200/experiments/2026-12-04-s28
o=$OUT/r; mkdir -p $o
timeout 300 .device/q/test_cuda > $o/gpu_test.log 2>&1; echo "test_cuda rc=$?"
grep -E "^\[  (PASSED|FAILED)|tests ran|Failure|FAILED" $o/gpu_test.log | head -20
$(command -v cuobjdump || echo /usr/local/cuda/bin/cuobjdump) -res-usage .device/q/fp4moe 2>/dev/null | grep -A1 "queue_kernel" | grep -o "REG:[0-9]* STACK:[0-9]* SHARED:[0-9]* LOCAL:[0-9]*" | head -3
declare -A TAC=(
  [glm-4.5-air]='nt=1 ksplit=2 bulk 2x4 ksteps, down ksplit=1|nt=1 ksplit=1 bulk 2x4 ksteps, 2 tiles per warp|gate_up queue'
  [deepseek-v3]='nt=1 ksplit=2 bulk 2x4 ksteps, down ksplit=1|nt=1 ksplit=1 bulk 2x4 ksteps, 2 tiles per warp|gate_up queue'
  [qwen3-30b-a3b]='nt=1 ksplit=4 bulk 2x4 ksteps, down ksplit=2, 6 CTAs|nt=1 ksplit=1 bulk 2x4 ksteps, combine kernel|nt=1 ksplit=1 bulk 2x4 ksteps, 2 tiles per warp, combine kernel|gate_up queue')
for r in 1 2; do for s in glm-4.5-air deepseek-v3 qwen3-30b-a3b; do
  j=$o/q-$s-r$r.json
  timeout 120 .device/q/fp4moe bench moe --device cuda --shape $s --tokens 1,4,16,64 --runners cuda.decode \
    --no-auto --tactics "${TAC[$s]}" --json $j > $o/q-$s-r$r.txt 2>&1
  echo "queue/other $s r$r $(python3 $E/split.py $j queue)"
done; done
grep -h "queue" $o/q-*-r1.txt | cut -c1-140
cd $OUT && tar czf r.tgz r && rm -rf r
