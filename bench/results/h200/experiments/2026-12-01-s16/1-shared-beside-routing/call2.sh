#!/usr/bin/env bash
# GPU call 2 (s16): the shared experts beside routing. Tests of the new build (n), then same-call A/B against
# cd9cd04 (f): FP4MOE_SHARED_CTAS = 0 (no side stream: the new row order alone), 88, 66.
set -uo pipefail
mkdir -p $OUT/r
N=.device/n
timeout 200 $N/test_cuda > $OUT/r/gpu_test.log 2>&1; echo "test_cuda rc=$?"; grep -E '^\[  (PASSED|FAILED)  \]' $OUT/r/gpu_test.log | head -20
for c in 0 1; do FP4MOE_SHARED_CTAS=$c timeout 60 $N/test_cuda --gtest_filter='GroupedLayer*' > $OUT/r/layer-ctas$c.log 2>&1; echo "layer ctas=$c rc=$? $(grep -E '^\[  (PASSED|FAILED)' $OUT/r/layer-ctas$c.log | tr '\n' ' ')"; done
for shape in deepseek-v3 glm-4.5-air; do
  for cfg in f:- n:0 n:88 n:66; do
    b=${cfg%%:*}; c=${cfg#*:}
    if [ "$c" = - ]; then unset FP4MOE_SHARED_CTAS; else export FP4MOE_SHARED_CTAS=$c; fi
    timeout 80 .device/$b/fp4moe bench moe --device cuda --shape $shape --tokens 256,1024,4096,16384 --runners cuda.grouped \
      --tactics 'wg=|bn=64 stages=6 rows=256' --no-auto > $OUT/r/$shape-$b$c.txt 2>&1
    echo "== $shape $b $c rc=$? $(date +%T) $(grep 'measured floor' $OUT/r/$shape-$b$c.txt | grep -oE 'peak [0-9.]+')"
    grep -E "^cuda" $OUT/r/$shape-$b$c.txt | sed -E 's/  +/ /g' | sed -E 's/cuda.grouped //; s/, down bn=128 stages=4 rows=256//' | cut -c1-75
  done
done
unset FP4MOE_SHARED_CTAS
cd $OUT/r && tar czf ../r.tgz . && cd .. && rm -rf r
