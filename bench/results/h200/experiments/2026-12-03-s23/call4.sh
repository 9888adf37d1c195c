#!/usr/bin/env bash
# s23 call 4: the build to land. (1) decode, routing and dequant tests; (2) one A/B round: the T >= 4 favourites
# with the fused combine (one release fence) against the same tactics with the combine kernel; (3) the acceptance
# sweep (scripts/gpu_bench.sh, every T, both runners, the torch peer); (4) the grouped tests.
set -u
export LD_LIBRARY_PATH=$PWD/.device/lib
B=$PWD/.device/t/fp4moe
o=$OUT/r; mkdir -p $o/sweep
timeout 120 .device/t/test_cuda --gtest_filter='*Decode*:CudaMoeRoute*:CudaNvfp4*' > $o/test1.txt 2>&1; echo "tests 1 rc=$?"; grep -E "PASSED|FAILED|tests ran" $o/test1.txt | head
TAC='nt=1 ksplit=1 bulk 2x4 ksteps|nt=1 ksplit=2 bulk 2x4 ksteps, down ksplit=1, 2 tiles per warp|nt=1 ksplit=1 bulk 2x8 ksteps'
for s in glm-4.5-air qwen3-30b-a3b deepseek-v3; do
  timeout 60 $B bench moe --device cuda --shape $s --tokens 1,4,16,64 --runners cuda.decode \
    --tactics "$TAC" --no-auto --json $o/b-$s-h0-r1.json > $o/b-$s-h0-r1.txt 2>&1
  echo "== A/B $s rc=$?"
done
SHAPES="glm-4.5-air deepseek-v3 qwen3-30b-a3b" BENCH_ARGS="--tactics default" FP4MOE=$B timeout 300 \
  bash scripts/gpu_bench.sh $o/sweep 1,4,16,64,256,512,1024,4096,16384 > $o/sweep/sweep.log 2>&1
echo "sweep rc=$?"; grep -E "^\| auto" $o/sweep/*.md | grep -E "\| (1|4|16|64) \|" | cut -c1-220
timeout 170 .device/t/test_cuda --gtest_filter='*Grouped*' > $o/test2.txt 2>&1; echo "tests 2 rc=$?"; grep -E "PASSED|FAILED|tests ran|OK \]" $o/test2.txt | tail -30
cd $OUT && tar czf r.tgz r && rm -rf r
