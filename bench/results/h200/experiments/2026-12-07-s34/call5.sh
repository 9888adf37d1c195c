#!/usr/bin/env bash
# s34 call 5: the H200 landing check of main (.device/x: fp4moe and test_cuda built from it here), only if the machine lent is an
# H200 (an H100 got call 4 already: exit at once). scripts/gpu_bench.sh (every tactic, auto, the torch peer) into
# $OUT/r/h200, then the decode and routing GPU tests (all of test_cuda passed on the H100 with these binaries).
set -u
export LD_LIBRARY_PATH=$PWD/.device/lib
name=$(nvidia-smi --query-gpu=name --format=csv,noheader | head -1); echo "$name"
case $name in *H200*) ;; *) echo "not an H200: nothing to do"; exit 0 ;; esac
o=$OUT/r/h200; mkdir -p $o
FP4MOE=$PWD/.device/x/fp4moe timeout 330 bash scripts/gpu_bench.sh $o 1,4,16,64 > $o/decode-run.log 2>&1; echo "bench rc=$?"
python3 bench/results/h200/experiments/2026-12-05-s30/table.py $o
timeout 100 .device/x/test_cuda --gtest_filter='*Decode*:*MoeRoute*' > $o/gpu_test.log 2>&1; echo "test_cuda rc=$?"
grep -E "^\[  (PASSED|FAILED)|tests ran|FAILED|^\[==========\]" $o/gpu_test.log | head -20
cd $OUT && tar czf r.tgz r && rm -rf r
