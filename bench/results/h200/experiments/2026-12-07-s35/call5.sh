#!/usr/bin/env bash
# s35 call 5 = s34 call 6 at T = 16, 64 only (the device time left): the A/B of ../2026-12-07-s34/bycount.patch. (s34 note follows)
#
# rebuild .device/x): shared_nt's groups by row count instead of by shared-ness: any expert with more than nt tiles of rows
# (the shared experts from T = 9, a routed expert with 9+ tokens) makes groups of shared_nt = 2 tiles; a one-tile
# expert (a shared one at T <= 8 too) runs the plain body. .device/n = b8cc3ef (call 4's binary), .device/x = the
# change. x's decode and routing GPU tests, then n / x interleaved, two rounds, T = 4, 16, 64, the T >= 4 favourites and their
# shared-nt variants; pertac.py: lowest us per tactic and T for each binary.
set -u
export LD_LIBRARY_PATH=$PWD/.device/lib
nvidia-smi --query-gpu=name --format=csv,noheader | head -1
o=$OUT/r; mkdir -p $o
timeout 90 .device/x/test_cuda --gtest_filter='*Decode*:*MoeRoute*' > $o/gpu_test-x.log 2>&1; echo "test_cuda (x) rc=$?"
grep -E "^\[  (PASSED|FAILED)|tests ran|Failure|FAILED" $o/gpu_test-x.log | head -20
TAC='nt=1 ksplit=1 bulk 2x4 ksteps, 2 tiles per warp, combine kernel|nt=1 ksplit=2 bulk 2x4 ksteps, down ksplit=1, 2 tiles per warp, combine kernel|5 CTAs per SM, combine kernel, shared'
for r in 1 2; do for s in glm-4.5-air deepseek-v3; do for b in n x; do
  timeout 50 .device/$b/fp4moe bench moe --device cuda --shape $s --tokens 16,64 --runners cuda.decode \
    --no-auto --tactics "$TAC" --json $o/$b-$s-r$r.json > $o/$b-$s-r$r.txt 2>&1 || echo "bench $b $s r$r failed"
done; done; done
for s in glm-4.5-air deepseek-v3; do for b in n x; do
  echo "== $s $b"; python3 bench/results/h200/experiments/2026-12-05-s29/pertac.py $o/$b-$s-r*.json
done; done
cd $OUT && tar czf r.tgz r && rm -rf r
