#!/usr/bin/env bash
# s25 call 1: the one-launch decode routing (moe_route_decode.cu). .device/m = this tree's build (fp4moe, test_cuda),
# .device/o = 83972f8's fp4moe (two routing kernels). Routing and layer tests, then old vs new whole layer at
# T = 1, 2, 4, 8 with the tactics `auto` took at T = 1 and 4 in s24 call 10, three interleaved rounds.
set -u
export LD_LIBRARY_PATH=$PWD/.device/lib
E=bench/results/h200/experiments/2026-12-03-s25
o=$OUT/r; mkdir -p $o
timeout 240 .device/m/test_cuda --gtest_filter='CudaMoeRoute*:*Decode*' > $o/gpu_test.log 2>&1; echo "test_cuda rc=$?"
grep -E "^\[  (PASSED|FAILED)|tests ran|Failure|FAILED" $o/gpu_test.log | head -20
declare -A TAC
TAC[glm-4.5-air]='nt=1 ksplit=2 bulk 2x4 ksteps, down ksplit=1'
TAC[deepseek-v3]='nt=1 ksplit=2 bulk 2x4 ksteps, down ksplit=1|nt=1 ksplit=1 bulk 2x4 ksteps, 2 tiles per warp, combine kernel'
TAC[qwen3-30b-a3b]='nt=1 ksplit=4 bulk 2x4 ksteps, down ksplit=2, 6 CTAs per SM|nt=1 ksplit=1 bulk 2x4 ksteps, combine kernel'
for round in 1 2 3; do for s in glm-4.5-air deepseek-v3 qwen3-30b-a3b; do for b in o m; do
  j=$o/b-$s-$b-r$round.json
  timeout 60 .device/$b/fp4moe bench moe --device cuda --shape $s --tokens 1,2,4,8 --runners cuda.decode --no-auto \
    --tactics "${TAC[$s]}" --json $j > /dev/null 2> ${j%.json}.err
  echo "$s $b r$round $(python3 $E/best.py $j 2>&1 | tail -1)"
done; done; done
cd $OUT && tar czf r.tgz r && rm -rf r
