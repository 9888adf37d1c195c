#!/usr/bin/env bash
# Session 22 call 1: the grouped tests with the narrow-tail tactics, then wg=3 tactics side by side (two rounds).
set -u
export LD_LIBRARY_PATH=$PWD/.device/lib
D=$OUT/r; mkdir -p $D
nvidia-smi --query-gpu=name,clocks.sm,power.draw --format=csv > $D/gpu.txt 2>&1
( cd $D && timeout 200 $OLDPWD/.device/t/test_cuda --gtest_brief=1 --gtest_filter='Grouped*' > tests.txt 2>&1; echo "rc=$?" >> tests.txt )
tail -4 $D/tests.txt
for r in 1 2; do for shape in deepseek-v3 glm-4.5-air; do
  timeout 100 .device/t/fp4moe bench moe --device cuda --shape $shape --tokens 1024,4096,16384 --runners cuda.grouped \
    --tactics 'wg=3' --no-auto > $D/pre-$shape-r$r.txt 2>&1
  echo "== $shape r$r rc=$?"; grep -E "^(cuda|measured)" $D/pre-$shape-r$r.txt | sed -E 's/  +/ /g' | cut -c1-190
done; done
for f in 'tails' 'stages=6 rows=192 wg=3, down bn=128 stages=4 rows=256'; do
  timeout 80 ncu -k 'regex:grouped_gemm' -c 6 --metrics gpu__time_duration.sum .device/t/fp4moe bench moe --device cuda \
    --shape deepseek-v3 --tokens 4096 --runners cuda.grouped --tactics "$f" --no-auto > $D/ncu-${f%% *}.txt 2>&1
  echo "ncu '$f' rc=$?"; grep -E "grouped_gemm_kernel<|us +[0-9.]+$|ms +[0-9.]+$" $D/ncu-${f%% *}.txt | sed -E 's/\(CUtensorMap.*//; s/  +/ /g'
done
cd $OUT && tar czf r.tgz r
