#!/usr/bin/env bash
# s24 call 4: .device/y = main + down-config.patch: tactics whose down GEMM has its own tiles per warp and CTAs per
# SM (down's grid at T = 4 was 1.75 waves at glm-4.5-air, ncu s23: SMs busy 77 % of down's time). Decode tests,
# then two rounds of every combine-kernel tactic.
set -u
export LD_LIBRARY_PATH=$PWD/.device/lib
o=$OUT/r; mkdir -p $o
timeout 240 .device/y/test_cuda --gtest_filter='*Decode*:CudaMoeRoute*' > $o/test-y.txt 2>&1; echo "tests y rc=$?"; grep -E "PASSED|FAILED" $o/test-y.txt | head -8
for round in 1 2; do for s in glm-4.5-air deepseek-v3 qwen3-30b-a3b; do
  timeout 90 .device/y/fp4moe bench moe --device cuda --shape $s --tokens 1,4,16,64 --runners cuda.decode --no-auto --tactics 'combine kernel' \
    --json $o/b-$s-y-r$round.json > $o/b-$s-y-r$round.txt 2>&1; echo "$s y $round rc=$?"
done; done
cd $OUT && tar czf r.tgz r && rm -rf r
