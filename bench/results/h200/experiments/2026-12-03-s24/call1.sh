#!/usr/bin/env bash
# s24 call 1: .device/t = main (67cb60c, SASS = 70d094a), .device/v = main + s23/imad-hi.patch (the unpacking's
# right shifts as IMAD.HI), .device/w = main + l2pf.patch (gate_up's CTAs prefetch down's weights of their expert
# into L2, FP4MOE_L2PF = fraction of the L2 for all touched experts; gate_up's copies then evict_first).
# Decode tests of v and w, then two interleaved rounds of the tactics auto picked in s23 (and their neighbours).
set -u
export LD_LIBRARY_PATH=$PWD/.device/lib
o=$OUT/r; mkdir -p $o
nvidia-smi --query-gpu=name,clocks.sm,clocks.mem,power.draw,temperature.gpu --format=csv > $o/smi.txt
for b in v w; do timeout 150 .device/$b/test_cuda --gtest_filter='*Decode*:CudaMoeRoute*' > $o/test-$b.txt 2>&1; echo "tests $b rc=$?"; grep -E "PASSED|FAILED" $o/test-$b.txt | head -5; done
FP4MOE_L2PF=0.6 timeout 150 .device/w/test_cuda --gtest_filter='*Decode*' > $o/test-w6.txt 2>&1; echo "tests w0.6 rc=$?"; grep -E "PASSED|FAILED" $o/test-w6.txt | head -5
TAC='combine kernel|ksplit=2 bulk 2x4 ksteps, down ksplit=1|6 CTAs per SM'
run() { # binary tag env shape tokens
  env $3 timeout 60 .device/$1/fp4moe bench moe --device cuda --shape $4 --tokens $5 --runners cuda.decode --no-auto --tactics "$TAC" \
    --json $o/b-$4-$2-r$round.json > $o/b-$4-$2-r$round.txt 2>&1; echo "$4 $2 $round rc=$?"
}
for round in 1 2; do for s in glm-4.5-air deepseek-v3 qwen3-30b-a3b; do
  run t t X=0 $s 1,4,16,64
  run v v X=0 $s 1,4,16,64
  run w w0 FP4MOE_L2PF=0 $s 1,4
  run w w4 FP4MOE_L2PF=0.4 $s 1,4
  run w w6 FP4MOE_L2PF=0.6 $s 1,4
  run w w8 FP4MOE_L2PF=0.8 $s 1,4
done; done
cd $OUT && tar czf r.tgz r && rm -rf r
