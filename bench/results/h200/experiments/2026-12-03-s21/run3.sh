#!/usr/bin/env bash
# Session 21 call 3: test_cuda and the acceptance sweep (scripts/gpu_bench.sh) of the landed build.
set -u
export LD_LIBRARY_PATH=$PWD/.device/lib
D=$OUT/r; mkdir -p $D/sweep
( cd $D && timeout 250 $OLDPWD/.device/t/test_cuda > gpu_test.log 2>&1; echo "rc=$?" >> gpu_test.log )
tail -3 $D/gpu_test.log
SHAPES="glm-4.5-air deepseek-v3 qwen3-30b-a3b" BENCH_ARGS="--tactics default" FP4MOE=$PWD/.device/t/fp4moe \
  timeout 320 bash scripts/gpu_bench.sh $D/sweep 1,4,16,64,256,512,1024,4096,16384 > $D/sweep/sweep.log 2>&1
echo "sweep rc=$?"
grep -h "^auto" $D/sweep/*.txt | cut -c1-60,100-200
cd $OUT && tar czf r.tgz r
