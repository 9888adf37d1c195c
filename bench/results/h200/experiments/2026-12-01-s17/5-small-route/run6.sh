#!/usr/bin/env bash
# s17 call 6: the 256-thread top-k + plan kernel for T <= 8: routing and layer tests, then T = 1 / 4 / 16 against
# main (d/fp4moe with FP4MOE_DIAG=0 is main's code), interleaved, two rounds, each shape's sweep tactics.
set -u
d=$(cd "$(dirname "$0")" && pwd)
o=$OUT/k; mkdir -p $o
timeout 200 $d/t/test_cuda --gtest_filter='CudaMoeRoute*:*DecodeLayer*:*GroupedLayer*' > $o/tests.txt 2>&1; echo "tests rc=$?" >> $o/tests.txt
grep -E "^\[  (PASSED|FAILED)|FAILED|tests rc" $o/tests.txt | head -20
for round in 1 2; do
for s in glm-4.5-air deepseek-v3 qwen3-30b-a3b; do
  for b in d t; do
    FP4MOE_DIAG=0 timeout 100 $d/$b/fp4moe bench moe --device cuda --shape $s --tokens 1,4,16 --runners cuda.decode --tactics 'ksplit=2 bulk 2x4 ksteps, down ksplit=1|nt=1 ksplit=1 bulk 2x4 ksteps|ksplit=4 bulk 2x4 ksteps, down ksplit=2' --no-auto > $o/$s-$b-$round.txt 2>&1
    echo "== $s $b round $round rc=$?"; grep -E "^cuda\." $o/$s-$b-$round.txt | sed -E 's/  +/ /g' | awk '{print $0}' | cut -c1-110
  done
done
done
cd $OUT && tar czf k.tgz k
