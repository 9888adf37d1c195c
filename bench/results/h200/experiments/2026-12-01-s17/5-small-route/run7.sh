#!/usr/bin/env bash
# s17 call 7: the refactored routing kernels: the whole test_cuda, then T = 1 / 4 against main (d/, FP4MOE_DIAG=0).
set -u
d=$(cd "$(dirname "$0")" && pwd)
o=$OUT/v; mkdir -p $o
timeout 330 $d/t/test_cuda > $o/tests.txt 2>&1; echo "tests rc=$?" >> $o/tests.txt
grep -E "^\[  (PASSED|FAILED)|^\[  FAILED|tests rc|tests ran" $o/tests.txt | head -20
for round in 1 2; do
for s in qwen3-30b-a3b glm-4.5-air; do
  for b in d t; do
    FP4MOE_DIAG=0 timeout 60 $d/$b/fp4moe bench moe --device cuda --shape $s --tokens 1,4 --runners cuda.decode --tactics 'nt=1 ksplit=1 bulk 2x4 ksteps|ksplit=4 bulk 2x4 ksteps, down ksplit=2|ksplit=2 bulk 2x4 ksteps, down ksplit=1' --no-auto > $o/$s-$b-$round.txt 2>&1
    printf "%s %s r%s: " $s $b $round; grep -E "^cuda\.decode" $o/$s-$b-$round.txt | sed -E 's/  +/ /g' | awk '{ n=NF; printf "%s/%s ", $(n-7), $(n-6) }'; echo
  done
done
done
cd $OUT && tar czf v.tgz v
