#!/usr/bin/env bash
# s30 call 4: call 3 cut to the device time left (346 s, a start included): the landing check of d5353a0 on
# qwen3-30b-a3b and glm-4.5-air (scripts/gpu_bench.sh), then the decode runner's GPU tests (gtest filter), into
# $OUT/<card>, files written straight under $OUT.
set -u
export LD_LIBRARY_PATH=$PWD/.device/lib
name=$(nvidia-smi --query-gpu=name --format=csv,noheader | head -1); echo "$name"
case $name in *H200*) card=h200 ;; *H100*) card=h100 ;; *) card=other ;; esac
o=$OUT/$card; mkdir -p $o
SHAPES="qwen3-30b-a3b glm-4.5-air" FP4MOE=$PWD/.device/n/fp4moe timeout 160 bash scripts/gpu_bench.sh $o 1,4,16,64 \
  > $o/decode-run.log 2>&1; echo "bench rc=$?"
grep -E "^\| auto" $o/*.md | cut -c1-200
timeout 50 .device/n/test_cuda --gtest_filter='*Decode*' > $o/gpu_test.log 2>&1; echo "test_cuda rc=$?"
grep -E "^\[  (PASSED|FAILED)|tests ran|FAILED" $o/gpu_test.log | head -20
