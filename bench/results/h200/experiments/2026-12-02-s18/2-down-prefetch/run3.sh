#!/usr/bin/env bash
# s18 call 3: tests; main (m/) vs this build (t/: down prefetch tactics, the fused top-k kernel without its
# second logits read) at T = 1, 2, 4, three shapes, two rounds.
set -u
d=$(cd "$(dirname "$0")" && pwd)
o=$OUT/r; mkdir -p $o
start=$(date +%s)
timeout 200 $d/t/test_cuda --gtest_filter='*DecodeLayer*:*DecodeRunner*:*CudaMoeRoute*' > $o/tests.txt 2>&1; echo "tests rc=$?" >> $o/tests.txt
grep -E "^\[  (FAILED|PASSED) |FAILED  \]|Failure|rc=" $o/tests.txt | head -20
echo "tests took $(( $(date +%s) - start )) s"
tacs='nt=1 ksplit=2 bulk 2x4 ksteps, down ksplit=1|nt=1 ksplit=4 bulk 2x4 ksteps, down ksplit|nt=1 ksplit=1 bulk 2x4 ksteps, d|2x4 ksteps, 2 tiles'
for round in 1 2; do
  for shape in glm-4.5-air qwen3-30b-a3b deepseek-v3; do
    for b in m t; do
      [ $(( $(date +%s) - start )) -gt 520 ] && break 3
      f=$o/$shape-$b-$round.txt
      timeout 120 $d/$b/fp4moe bench moe --device cuda --shape $shape --tokens 1,2,4 --runners cuda.decode --tactics "$tacs" --no-auto > $f 2>&1
      echo "== $shape $b round $round rc=$? at $(( $(date +%s) - start )) s"
    done
  done
done
cd $OUT && tar czf r.tgz r
