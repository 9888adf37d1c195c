#!/usr/bin/env bash
# s24 call 7: the wgmma router (one bf16 part: the bench's router values are bf16, as checkpoints') below T = 256,
# FP4MOE_ROUTER_WGMMA_MIN_T = n (.device/s = main + stages-wgmma-router.patch). Router tests with n = 2; routing
# alone (FP4MOE_STAGES=0) and the whole layer at T = 16, 32, 64 (and 4, 8), deepseek-v3 and glm-4.5-air, n = 256 (as main) vs 2.
set -u
export LD_LIBRARY_PATH=$PWD/.device/lib
o=$OUT/r; mkdir -p $o
FP4MOE_ROUTER_WGMMA_MIN_T=2 timeout 120 .device/s/test_cuda --gtest_filter='*Router*:*Route*' > $o/test.txt 2>&1; echo "tests rc=$?"; grep -E "PASSED|FAILED" $o/test.txt | head
TAC='nt=1 ksplit=1 bulk 2x4 ksteps, 2 tiles per warp, combine kernel'
for round in 1 2; do for s in deepseek-v3 glm-4.5-air qwen3-30b-a3b; do for st in 0 3; do for n in 256 2; do
  FP4MOE_STAGES=$st FP4MOE_ROUTER_WGMMA_MIN_T=$n timeout 60 .device/s/fp4moe bench moe --device cuda --shape $s --tokens 4,8,16,32,64 --runners cuda.decode --no-auto --tactics "$TAC" \
    --json $o/b-$s-s${st}n$n-r$round.json > $o/b-$s-s${st}n$n-r$round.txt 2>&1; echo "$s s$st n$n $round rc=$?"
done; done; done; done
cd $OUT && tar czf r.tgz r && rm -rf r
