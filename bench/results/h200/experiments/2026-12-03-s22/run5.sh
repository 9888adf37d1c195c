#!/usr/bin/env bash
# Session 22 call 5: the acceptance sweep of cbb294a (scripts/gpu_bench.sh, auto across both runners), then test_cuda.
set -u
export LD_LIBRARY_PATH=$PWD/.device/lib
D=$OUT/r; mkdir -p $D/sweep
SHAPES="deepseek-v3 glm-4.5-air qwen3-30b-a3b" BENCH_ARGS="--tactics default" FP4MOE=$PWD/.device/t/fp4moe \
  timeout 370 bash scripts/gpu_bench.sh $D/sweep 1,4,16,64,256,512,1024,4096,16384 > $D/sweep/sweep.log 2>&1
echo "sweep rc=$?"
grep -h "^auto" $D/sweep/*.txt | cut -c1-60,100-200
(cd $OUT && tar czf r.tgz r)
( cd $OUT && timeout 160 $OLDPWD/.device/t/test_cuda > gpu_test.log 2>&1; echo "rc=$?" >> gpu_test.log )
tail -4 $OUT/gpu_test.log
