#!/usr/bin/env bash
# s34 call 3: call 2 again, with the shared-nt tactics' shared groups first in find_group's order (and in the act
# layout), so their longer CTAs start in the first wave; and, as call 2 read main's own ksplit = 2 tactics 1-7 %
# faster in x (the K parts' partial sums now meet in the warps' rings: 4 KB less static shared memory per CTA),
# every T = 1 .. 64 favourite of the H100's acceptance run with ksplit > 1, at T = 1, 4, 16, 64, on all three shapes.
# .device/n = main (ffb5e2b), .device/x = main + the change; x's decode and routing tests first; four rounds
# interleaved; pertac.py: lowest us per tactic and T for each binary.
set -u
export LD_LIBRARY_PATH=$PWD/.device/lib
nvidia-smi --query-gpu=name --format=csv,noheader | head -1
o=$OUT/r; mkdir -p $o
timeout 120 .device/x/test_cuda --gtest_filter='*Decode*:*MoeRoute*' > $o/gpu_test-x.log 2>&1; echo "test_cuda (x) rc=$?"
grep -E "^\[  (PASSED|FAILED)|tests ran|Failure|FAILED" $o/gpu_test-x.log | head -20
T64='nt=1 ksplit=1 bulk 2x4 ksteps, 2 tiles per warp, combine kernel|nt=1 ksplit=2 bulk 2x4 ksteps, down ksplit=1, 2 tiles per warp, combine kernel|5 CTAs per SM, combine kernel, shared'
declare -A TAC=(
  [glm-4.5-air]="$T64|nt=1 ksplit=2 bulk 2x4 ksteps, down ksplit=1, 3 CTAs per SM, 8 warps per CTA"
  [deepseek-v3]="$T64|nt=1 ksplit=4 bulk 2x4 ksteps, down ksplit=1, 6 CTAs per SM"
  [qwen3-30b-a3b]="nt=1 ksplit=4 bulk 2x4 ksteps, down ksplit=2, 6 CTAs per SM|nt=1 ksplit=2 bulk 2x4 ksteps, down ksplit=1, 2 tiles per warp, combine kernel")
for r in 1 2 3 4; do for s in glm-4.5-air deepseek-v3 qwen3-30b-a3b; do for b in n x; do
  timeout 60 .device/$b/fp4moe bench moe --device cuda --shape $s --tokens 1,4,16,64 --runners cuda.decode \
    --no-auto --tactics "${TAC[$s]}" --json $o/$b-$s-r$r.json > $o/$b-$s-r$r.txt 2>&1 || echo "bench $b $s r$r failed"
done; done; done
for s in glm-4.5-air deepseek-v3 qwen3-30b-a3b; do for b in n x; do
  echo "== $s $b"; python3 bench/results/h200/experiments/2026-12-05-s29/pertac.py $o/$b-$s-r*.json
done; done
cd $OUT && tar czf r.tgz r && rm -rf r
