#!/usr/bin/env bash
# s24 call 9: router logits of T <= 64 on bf16 tensor cores (router_logits_decode_mma.cu) for bf16 routers, from
# T >= FP4MOE_ROUTER_DMMA_MIN_T (65 = off, main's split-K FMA kernel). .device/r = main + decode-mma-router.patch
# (+ the stage ablation). Router and routing tests with the kernel on for every T; routing alone (FP4MOE_STAGES=0)
# and the whole layer, off vs on, T = 1..64, two rounds.
set -u
export LD_LIBRARY_PATH=$PWD/.device/lib
o=$OUT/r; mkdir -p $o
FP4MOE_ROUTER_DMMA_MIN_T=1 timeout 150 .device/r/test_cuda --gtest_filter='*Route*:*Router*:*DecodeLayer*' > $o/test.txt 2>&1; echo "tests rc=$?"; grep -E "PASSED|FAILED" $o/test.txt | head
TAC='nt=1 ksplit=1 bulk 2x4 ksteps, 2 tiles per warp, combine kernel'
for round in 1 2; do for s in deepseek-v3 glm-4.5-air qwen3-30b-a3b; do for st in 0 3; do for n in 65 1; do
  FP4MOE_STAGES=$st FP4MOE_ROUTER_DMMA_MIN_T=$n timeout 60 .device/r/fp4moe bench moe --device cuda --shape $s --tokens 1,2,4,8,16,32,64 --runners cuda.decode --no-auto --tactics "$TAC" \
    --json $o/b-$s-s${st}n$n-r$round.json > $o/b-$s-s${st}n$n-r$round.txt 2>&1; echo "$s s$st n$n $round rc=$?"
done; done; done; done
cd $OUT && tar czf r.tgz r && rm -rf r
