#!/usr/bin/env bash
# s23 call 6: the landed commit (70d094a). Decode/routing/dequant tests, the decode acceptance run (every tactic of
# both runners at T = 1, 4, 16, 64, auto, the torch peer; scripts/gpu_bench.sh), then the grouped tests.
set -u
export LD_LIBRARY_PATH=$PWD/.device/lib
B=$PWD/.device/t/fp4moe
o=$OUT/r; mkdir -p $o/h200
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader
timeout 120 .device/t/test_cuda --gtest_filter='*Decode*:CudaMoeRoute*:CudaNvfp4*' > $o/test1.txt 2>&1; echo "tests 1 rc=$?"; grep -E "PASSED|FAILED|tests ran" $o/test1.txt | head
FP4MOE=$B timeout 260 bash scripts/gpu_bench.sh $o/h200 1,4,16,64 > $o/h200/run.log 2>&1; echo "bench rc=$?"
grep -E "^\| auto" $o/h200/*.md | cut -c1-200
timeout 170 .device/t/test_cuda --gtest_filter='*Grouped*' > $o/test2.txt 2>&1; echo "tests 2 rc=$?"; grep -E "PASSED|FAILED|tests ran" $o/test2.txt | tail -5
cd $OUT && tar czf r.tgz r && rm -rf r
