#!/usr/bin/env bash
# GPU call 4 (s16): the weights' L2 prefetch by gate_up's / down's producer thread. p: one 4-step chunk ahead of
# the producer; q: two chunks ahead. Grouped tests of p, then same-call A/B against main (f), twice.
set -uo pipefail
mkdir -p $OUT/w
timeout 150 .device/p/test_cuda --gtest_filter='*Grouped*' > $OUT/w/test_grouped-p.log 2>&1
echo "test p rc=$? $(grep -E '^\[  (PASSED|FAILED)  \]' $OUT/w/test_grouped-p.log | tr '\n' ' ')"
for round in 1 2; do
  for shape in deepseek-v3 glm-4.5-air; do
    for b in f p q; do
      timeout 60 .device/$b/fp4moe bench moe --device cuda --shape $shape --tokens 256,1024,4096,16384 --runners cuda.grouped \
        --tactics 'wg=|bn=64 stages=6 rows=256|gate_up bn=256' --no-auto > $OUT/w/$shape-$b-$round.txt 2>&1
      echo "== $shape $b $round rc=$? $(date +%T) $(grep 'measured floor' $OUT/w/$shape-$b-$round.txt | grep -oE 'peak [0-9.]+')"
      grep -E "^cuda" $OUT/w/$shape-$b-$round.txt | sed -E 's/  +/ /g' | sed -E 's/cuda.grouped //; s/, down bn=128 stages=4 rows=256//' | cut -c1-62
    done
  done
done
cd $OUT/w && tar czf ../w.tgz . && cd .. && rm -rf w
