#!/usr/bin/env bash
# s23 call 3: down's fused combine. FP4MOE_EXP_MODE (experiment knob): 0 = main (an SC fence before each tile's
# counter increment and again before the combine), 1 = one release fence, the MT tiles' relaxed increments in
# flight together, an acquire fence only in a warp that combines, 2 = no combine at all (wrong outputs: the bound).
# Decode tests under mode 1 first.
set -u
export LD_LIBRARY_PATH=$PWD/.device/lib
B=$PWD/.device/t/fp4moe
o=$OUT/r; mkdir -p $o
FP4MOE_EXP_MODE=1 timeout 200 .device/t/test_cuda --gtest_filter='*Decode*' > $o/test.txt 2>&1; echo "tests mode 1 rc=$?"; grep -E "PASSED|FAILED|tests ran" $o/test.txt | head
TAC='2 tiles per warp|nt=1 ksplit=1 bulk 2x4 ksteps|bulk 2x8 ksteps|nt=1 ksplit=2 bulk 2x4 ksteps, down ksplit=1|nt=1 ksplit=4 bulk 2x4 ksteps, down ksplit=2, 6 CTAs per SM'
for round in 1 2; do for m in 0 1 2; do
  for s in glm-4.5-air qwen3-30b-a3b deepseek-v3; do
    FP4MOE_EXP_MODE=$m timeout 150 $B bench moe --device cuda --shape $s --tokens 1,4,16,64 --runners cuda.decode \
      --tactics "$TAC" --no-auto --json $o/b-$s-h$m-r$round.json > $o/b-$s-h$m-r$round.txt 2>&1
    echo "== $s mode=$m round=$round rc=$?"
  done
done; done
cd $OUT && tar czf r.tgz r && rm -rf r
