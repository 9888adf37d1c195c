#!/usr/bin/env bash
# s17 call 1: test_cuda's grouped tests (the even_tail tactics among them), then the same-call A/B.
set -u
d=$(cd "$(dirname "$0")" && pwd)
o=$OUT/r; mkdir -p $o
nvidia-smi --query-gpu=name,clocks.max.sm,power.limit --format=csv,noheader > $o/gpu.txt
timeout 300 $d/t/test_cuda --gtest_filter='GroupedRunner*:GroupedLayer*' > $o/tests.txt 2>&1; echo "tests rc=$?" >> $o/tests.txt
tail -4 $o/tests.txt
for round in 1 2; do
  for shape in deepseek-v3 glm-4.5-air; do
    timeout 200 $d/t/fp4moe bench moe --device cuda --shape $shape --tokens 1024,4096,16384 --runners cuda.grouped \
      --tactics 'wg=3|bn=128 stages=4 rows=256' --no-auto > $o/$shape-$round.txt 2>&1
    echo "== $shape round $round rc=$?"
    grep -E "^cuda\." $o/$shape-$round.txt | sed -E 's/  +/ /g' | cut -c1-140
  done
done
cd $OUT && tar czf r.tgz r
