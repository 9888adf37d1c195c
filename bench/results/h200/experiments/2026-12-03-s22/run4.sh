#!/usr/bin/env bash
# Session 22 call 4: the grouped tests of the tail-launch build (tails in 4- or 5-warpgroup CTAs), then its tactics
# beside main's at T = 1024 / 4096 / 16384, two rounds.
set -u
export LD_LIBRARY_PATH=$PWD/.device/lib
D=$OUT/r; mkdir -p $D
( cd $D && timeout 200 $OLDPWD/.device/t/test_cuda --gtest_brief=1 --gtest_filter='*Grouped*' > tests.txt 2>&1; echo "rc=$?" >> tests.txt )
tail -3 $D/tests.txt
for r in 1 2; do for shape in deepseek-v3 glm-4.5-air; do
  timeout 80 .device/t/fp4moe bench moe --device cuda --shape $shape --tokens 1024,4096,16384 --runners cuda.grouped \
    --tactics 'stages=6 rows=192 wg=3, down bn=128 stages=4' --no-auto > $D/pre-$shape-r$r.txt 2>&1
  echo "== $shape r$r rc=$?"; grep -E "^(cuda|measured)" $D/pre-$shape-r$r.txt | sed -E 's/  +/ /g; s/cuda.grouped gate_up bn=192 stages=6 rows=192 wg=3, down bn=128 stages=4 rows=256/main/' | cut -c1-130
done; done
cd $OUT && tar czf r.tgz r
