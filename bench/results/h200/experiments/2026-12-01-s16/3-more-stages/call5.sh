#!/usr/bin/env bash
# GPU call 5 (s16): three more grouped tactics (gate_up wg=3 at 7 ring stages, down at 5): all GPU tests, the wg=3
# tactics side by side twice, then the acceptance sweep of this binary.
set -uo pipefail
mkdir -p $OUT/t/ab $OUT/t/sweep
timeout 200 .device/t/test_cuda > $OUT/t/gpu_test.log 2>&1; echo "test_cuda rc=$?"; grep -E '^\[  (PASSED|FAILED)  \]' $OUT/t/gpu_test.log | head
for round in 1 2; do
  for shape in deepseek-v3 glm-4.5-air; do
    timeout 60 .device/t/fp4moe bench moe --device cuda --shape $shape --tokens 1024,4096,16384 --runners cuda.grouped \
      --tactics 'wg=3' --no-auto > $OUT/t/ab/$shape-$round.txt 2>&1
    echo "== $shape $round rc=$? $(date +%T) $(grep 'measured floor' $OUT/t/ab/$shape-$round.txt | grep -oE 'peak [0-9.]+')"
    grep -E "^cuda" $OUT/t/ab/$shape-$round.txt | sed -E 's/  +/ /g' | sed -E 's/cuda.grouped gate_up bn=192 //; s/rows=192 wg=3, down bn=128//; s/rows=256//' | cut -c1-62
  done
done
cp $OUT/t/gpu_test.log $OUT/t/sweep/
FP4MOE=.device/t/fp4moe SHAPES="glm-4.5-air deepseek-v3 qwen3-30b-a3b" BENCH_ARGS="--tactics default" timeout 280 bash scripts/gpu_bench.sh $OUT/t/sweep 1,4,16,64,256,512,1024,4096,16384 > $OUT/t/sweep/sweep.log 2>&1
echo "sweep rc=$?"; grep -E "^auto cuda.grouped" $OUT/t/sweep/sweep.log | sed -E 's/  +/ /g' | cut -c1-150
cd $OUT/t && tar czf ../t.tgz . && cd .. && rm -rf t
