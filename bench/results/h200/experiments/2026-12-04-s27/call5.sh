#!/usr/bin/env bash
# s27 call 5: the landing check of main after the review cleanup (.device/m = its build): every GPU test, then
# bench moe with auto at T = 1, 4, 16, 64 for the three shapes (no peer: device time).
set -u
export LD_LIBRARY_PATH=$PWD/.device/lib
o=$OUT/r; mkdir -p $o
timeout 260 .device/m/test_cuda > $o/gpu_test.log 2>&1; echo "test_cuda rc=$?"
grep -E "^\[  (PASSED|FAILED)|tests ran|Failure" $o/gpu_test.log | head -20
for s in glm-4.5-air deepseek-v3 qwen3-30b-a3b; do
  timeout 90 .device/m/fp4moe bench moe --device cuda --shape $s --tokens 1,4,16,64 --json $o/$s.json --md $o/$s.md > $o/$s.txt 2>&1; echo "$s rc=$?"
  grep "^auto" $o/$s.txt
done
cd $OUT && tar czf r.tgz r && rm -rf r
