#!/usr/bin/env bash
# s34 call 2: the shared experts' token groups (NOTES "Next for issue 4", item 2). Two builds: .device/n = main
# (ffb5e2b), .device/x = main + the change (tactics with `shared_nt` = 2: a shared expert's work group holds 2 token
# tiles, so each dequantized K step serves 16 of its rows instead of 8; the K parts' sums meet in the warps' rings). x's decode and routing GPU
# tests, then per shape both binaries interleaved, three rounds, T = 16 and 64, the two T >= 16 favourites of main
# (2 tiles per warp, combine kernel; ksplit 1 and 2) and in x their shared-nt = 2 variants (as compiled, and held
# to 5 CTAs per SM); pertac.py:
# lowest us per tactic and T for each binary.
set -u
export LD_LIBRARY_PATH=$PWD/.device/lib
nvidia-smi --query-gpu=name --format=csv,noheader | head -1
o=$OUT/r; mkdir -p $o
timeout 120 .device/x/test_cuda --gtest_filter='*Decode*:*MoeRoute*' > $o/gpu_test-x.log 2>&1; echo "test_cuda (x) rc=$?"
grep -E "^\[  (PASSED|FAILED)|tests ran|Failure|FAILED" $o/gpu_test-x.log | head -20
TAC='nt=1 ksplit=1 bulk 2x4 ksteps, 2 tiles per warp, combine kernel|nt=1 ksplit=2 bulk 2x4 ksteps, down ksplit=1, 2 tiles per warp, combine kernel|5 CTAs per SM, combine kernel, shared'
for r in 1 2 3; do for s in glm-4.5-air deepseek-v3; do for b in n x; do
  timeout 60 .device/$b/fp4moe bench moe --device cuda --shape $s --tokens 16,64 --runners cuda.decode \
    --no-auto --tactics "$TAC" --json $o/$b-$s-r$r.json > $o/$b-$s-r$r.txt 2>&1 || echo "bench $b $s r$r failed"
done; done; done
for s in glm-4.5-air deepseek-v3; do for b in n x; do
  echo "== $s $b"; python3 bench/results/h200/experiments/2026-12-05-s29/pertac.py $o/$b-$s-r*.json
done; done
cd $OUT && tar czf r.tgz r && rm -rf r
