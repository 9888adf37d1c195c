#!/usr/bin/env bash
# s36 call 2: .device/x = main at dc009ef (kernels of main), .device/n = the routing change: the top k in one pass
# (route_token.cuh: a threshold from the 32 lanes' maxima, then ranks among the few candidates) and the plan of
# <= 128 pairs counted directly (route_plan_cta.cuh). n's routing and decode GPU tests; the routing latencies of both
# (DISABLED_Timings); then x / n interleaved, two rounds, T = 1, 4, the T <= 4 favourites of the three shapes;
# pertac.py: lowest us per tactic and T for each binary.
set -u
export LD_LIBRARY_PATH=$PWD/.device/lib
nvidia-smi --query-gpu=name --format=csv,noheader | head -1
o=$OUT/r; mkdir -p $o
timeout 150 .device/n/test_cuda --gtest_filter='*MoeRoute*:*Decode*' > $o/gpu_test-n.log 2>&1; echo "test_cuda (n) rc=$?"
grep -E "^\[  (PASSED|FAILED)|tests ran|Failure|FAILED" $o/gpu_test-n.log | head -20
for b in x n; do
  timeout 60 .device/$b/test_cuda --gtest_also_run_disabled_tests --gtest_filter='*Timings*' > $o/timings-$b.log 2>&1
  echo "timings $b rc=$?"
done
TAC='nt=1 ksplit=2 bulk 2x4 ksteps, down ksplit=1, 6 CTAs per SM|nt=1 ksplit=1 bulk 2x4 ksteps, combine kernel|nt=1 ksplit=2 bulk 2x4 ksteps|nt=1 ksplit=2 bulk 2x4 ksteps, down ksplit=1, 2 tiles per warp, combine kernel|nt=1 ksplit=4 bulk 2x4 ksteps, down ksplit=1, 6 CTAs per SM|nt=1 ksplit=1 bulk 2x4 ksteps, 6 CTAs per SM, combine kernel'
for r in 1 2; do for s in glm-4.5-air deepseek-v3 qwen3-30b-a3b; do for b in x n; do
  timeout 45 .device/$b/fp4moe bench moe --device cuda --shape $s --tokens 1,4 --runners cuda.decode \
    --no-auto --tactics "$TAC" --json $o/$b-$s-r$r.json > $o/$b-$s-r$r.txt 2>&1 || echo "bench $b $s r$r failed"
done; done; done
for s in glm-4.5-air deepseek-v3 qwen3-30b-a3b; do for b in x n; do
  echo "== $s $b"; python3 bench/results/h200/experiments/2026-12-05-s29/pertac.py $o/$b-$s-r*.json
done; done
cd $OUT && tar czf r.tgz r && rm -rf r
