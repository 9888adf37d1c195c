#!/usr/bin/env bash
# s18 call 2: tests; deepseek-v3 T = 1 per tactic (call 1's failure); main (m/) vs this build (t/) at T = 1, 2, 4.
set -u
d=$(cd "$(dirname "$0")" && pwd)
o=$OUT/r; mkdir -p $o
start=$(date +%s)
timeout 200 $d/t/test_cuda --gtest_filter='*DecodeLayer*:*DecodeRunner*:*CudaMoeRoute*' > $o/tests.txt 2>&1; echo "tests rc=$?" >> $o/tests.txt
grep -E "^\[  (FAILED|PASSED) |FAILED  \]|Failure|rc=" $o/tests.txt | head -20
echo "tests took $(( $(date +%s) - start )) s"
for tac in 'nt=1 ksplit=2 bulk 2x4 ksteps, down ksplit=1' 'nt=1 ksplit=1 bulk 2x4 ksteps, self-routing' 'down prefetch'; do
  timeout 60 $d/t/fp4moe bench moe --device cuda --shape deepseek-v3 --tokens 1 --runners cuda.decode --tactics "$tac" --no-auto > $o/dsv3-probe.txt 2>&1
  echo "== dsv3 probe '$tac' rc=$?"; grep -E "^cuda\.|error|fail" $o/dsv3-probe.txt | sed -E 's/  +/ /g' | cut -c1-150
done
for round in 1 2; do
  for shape in glm-4.5-air qwen3-30b-a3b; do
    for b in m t; do
      [ $(( $(date +%s) - start )) -gt 500 ] && break 3
      f=$o/$shape-$b-$round.txt
      if [ $b = m ]; then tacs='nt=1 ksplit=2 bulk 2x4 ksteps, down ksplit=1|nt=1 ksplit=4 bulk 2x4 ksteps, down ksplit=2'; else tacs='nt=1 ksplit=2 bulk 2x4 ksteps, down ksplit=1|nt=1 ksplit=4 bulk 2x4 ksteps, down ksplit=2|self-routing|down prefetch'; fi
      timeout 120 $d/$b/fp4moe bench moe --device cuda --shape $shape --tokens 1,2,4 --runners cuda.decode --tactics "$tacs" --no-auto > $f 2>&1
      echo "== $shape $b round $round rc=$? at $(( $(date +%s) - start )) s"
      grep -E "^cuda\." $f | sed -E 's/  +/ /g' | cut -c1-150
    done
  done
done
cd $OUT && tar czf r.tgz r
