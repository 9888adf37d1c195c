#!/usr/bin/env bash
# s18 call 4: tests; main (m/) vs this build (t/: 6-CTA-per-SM tactics, the tighter grid bound, the fused
# top-k kernel without its second logits read) at T = 1, 2, 4, 16, 64, three shapes, two rounds.
set -u
d=$(cd "$(dirname "$0")" && pwd)
o=$OUT/r; mkdir -p $o
start=$(date +%s)
nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.mem --format=csv,noheader > $o/gpu.txt 2>&1
timeout 200 $d/t/test_cuda --gtest_filter="*DecodeLayer*:*DecodeRunner*" > $o/tests.txt 2>&1; echo "tests rc=$?" >> $o/tests.txt; tail -3 $o/tests.txt

echo "tests took $(( $(date +%s) - start )) s"
tacs='nt=1 ksplit=2 bulk 2x4 ksteps, down ksplit=1|nt=1 ksplit=4 bulk 2x4 ksteps, down ksplit|nt=1 ksplit=1 bulk 2x4 ksteps|CTAs per SM'
for round in 6 7; do
  for shape in glm-4.5-air deepseek-v3; do
    for b in t t1 m; do
      [ $(( $(date +%s) - start )) -gt 300 ] && break 3
      f=$o/$shape-$b-$round.txt
      timeout 100 $d/$b/fp4moe bench moe --device cuda --shape $shape --tokens 1,4,16,64 --runners cuda.decode --tactics "$tacs" --no-auto > $f 2>&1
      echo "== $shape $b round $round rc=$? at $(( $(date +%s) - start )) s"
    done
  done
done
cd $OUT && tar czf r.tgz r
