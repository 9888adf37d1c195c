#!/usr/bin/env bash
# s24 call 2: .device/x = main + ready-mt4.patch: FP4MOE_GROUP_READY=1 makes down's CTAs wait only for their own
# group's gate_up warps (a counter per group, release/acquire) instead of all of gate_up (griddepcontrol.wait),
# for the combine-kernel tactics; three tactics with 4 weight tiles per warp. Decode tests in both modes, then two
# interleaved rounds of the combine-kernel tactics.
set -u
export LD_LIBRARY_PATH=$PWD/.device/lib
o=$OUT/r; mkdir -p $o
for m in 0 1; do FP4MOE_GROUP_READY=$m timeout 200 .device/x/test_cuda --gtest_filter='*Decode*:CudaMoeRoute*' > $o/test-x$m.txt 2>&1; echo "tests x$m rc=$?"; grep -E "PASSED|FAILED" $o/test-x$m.txt | head -8; done
TAC='combine kernel'
for round in 1 2; do for s in glm-4.5-air deepseek-v3 qwen3-30b-a3b; do for m in 0 1; do
  FP4MOE_GROUP_READY=$m timeout 60 .device/x/fp4moe bench moe --device cuda --shape $s --tokens 1,4,16,64 --runners cuda.decode --no-auto --tactics "$TAC" \
    --json $o/b-$s-x$m-r$round.json > $o/b-$s-x$m-r$round.txt 2>&1; echo "$s x$m $round rc=$?"
done; done; done
cd $OUT && tar czf r.tgz r && rm -rf r
