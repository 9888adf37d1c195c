#!/usr/bin/env bash
# s23 call 7: the E2M1 unpacking's two right shifts (register 3) as IMAD.HI by kernel-argument multipliers (ALU
# pipe -> FMA pipe: per tile-step 36 -> 28 ALU ops, 28 -> 36 FMA-pipe ops; SASS count unchanged). .device/t =
# 70d094a, .device/v = the variant (imad-hi.patch). Decode tests of the variant, then two interleaved rounds.
set -u
export LD_LIBRARY_PATH=$PWD/.device/lib
o=$OUT/r; mkdir -p $o
timeout 60 .device/v/test_cuda --gtest_filter='Rules/DecodeRunner*' > $o/test.txt 2>&1; echo "tests rc=$?"; grep -E "PASSED|FAILED" $o/test.txt | head -3
TAC='2 tiles per warp|nt=1 ksplit=2 bulk 2x4 ksteps, down ksplit=1, 6 CTAs per SM'
for round in 1 2; do for b in t v; do for s in glm-4.5-air deepseek-v3 qwen3-30b-a3b; do
  timeout 30 .device/$b/fp4moe bench moe --device cuda --shape $s --tokens 1,4,16,64 --runners cuda.decode \
    --tactics "$TAC" --no-auto --json $o/b-$s-$b-r$round.json > $o/b-$s-$b-r$round.txt 2>&1; echo "$s $b $round rc=$?"
done; done; done
cd $OUT && tar czf r.tgz r && rm -rf r
