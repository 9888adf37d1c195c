#!/usr/bin/env bash
# s23 call 2: (a) decode tests with the new tactics (two tiles per warp, deeper rings); (b) A/B of the mbarrier
# wait with a suspend-time hint (FP4MOE_EXP_WAIT_HINT, experiment knob) and the new tactics; (c) ncu stall
# reasons of gate_up and down at glm-4.5-air T = 64 with and without the hint.
set -u
export LD_LIBRARY_PATH=$PWD/.device/lib
B=$PWD/.device/t/fp4moe
o=$OUT/r; mkdir -p $o
timeout 200 .device/t/test_cuda --gtest_filter='*Decode*' > $o/test.txt 2>&1; echo "tests rc=$?"; grep -E "PASSED|FAILED|tests ran" $o/test.txt | head
TAC='2 tiles per warp|nt=1 ksplit=1 bulk 2x4 ksteps|nt=1 ksplit=1 bulk 2x8 ksteps'
for round in 1 2; do for h in 0 10000000; do
  for s in glm-4.5-air qwen3-30b-a3b deepseek-v3; do
    FP4MOE_EXP_WAIT_HINT=$h timeout 150 $B bench moe --device cuda --shape $s --tokens 1,4,16,64 --runners cuda.decode \
      --tactics "$TAC" --no-auto --json $o/b-$s-h$h-r$round.json > $o/b-$s-h$h-r$round.txt 2>&1
    echo "== $s hint=$h round=$round rc=$?"
  done
done; done
N=/usr/local/cuda/bin/ncu
for h in 0 10000000; do
FP4MOE_EXP_WAIT_HINT=$h timeout 100 $N --clock-control none --section SpeedOfLight --section WarpStateStats --metrics 'regex:smsp__average_warps_issue_stalled_.*_per_issue_active\.ratio,smsp__inst_executed.sum,sm__cycles_active.avg' \
  -k "regex:moe_gemm" -c 2 $B bench moe --device cuda --shape glm-4.5-air --tokens 64 --runners cuda.decode \
  --tactics 'nt=1 ksplit=1 bulk 2x4 ksteps, 2 tiles per warp' --no-auto > $o/ncu-h$h.txt 2>&1; echo "ncu $h rc=$?"
done
cd $OUT && tar czf r.tgz r && rm -rf r
