#!/usr/bin/env bash
# s18 call 1: decode tests (self-routing tactics among them), then same-call A/B at T = 1, 2, 4.
set -u
d=$(cd "$(dirname "$0")" && pwd)
o=$OUT/r; mkdir -p $o
start=$(date +%s)
nvidia-smi --query-gpu=name,clocks.max.sm,power.limit --format=csv,noheader > $o/gpu.txt
timeout 280 $d/t/test_cuda --gtest_filter='*DecodeLayer*:*DecodeRunner*' > $o/tests.txt 2>&1; echo "tests rc=$?" >> $o/tests.txt
grep -E "^\[  (FAILED|PASSED) |OK \]|FAILED  \]|Failure|rc=" $o/tests.txt | head -40
echo "tests took $(( $(date +%s) - start )) s"
for round in 1 2; do
  for shape in glm-4.5-air qwen3-30b-a3b deepseek-v3; do
    [ $(( $(date +%s) - start )) -gt 470 ] && break 2
    timeout 150 $d/t/fp4moe bench moe --device cuda --shape $shape --tokens 1,2,4 --runners cuda.decode \
      --tactics 'bulk 2x4 ksteps, down ksplit|self-routing' --no-auto > $o/$shape-$round.txt 2>&1
    echo "== $shape round $round rc=$? at $(( $(date +%s) - start )) s"
    grep -E "^cuda\." $o/$shape-$round.txt | sed -E 's/  +/ /g' | cut -c1-150
  done
done
cd $OUT && tar czf r.tgz r
