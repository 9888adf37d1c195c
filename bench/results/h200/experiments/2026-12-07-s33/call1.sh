#!/usr/bin/env bash
# s33 call 1: the landing check of main after the revert of tmp-early (ffb5e2b: d5353a0's kernels again), cut to
# the device time this session had left (~4.8 minutes after a failed start): the decode and routing GPU tests
# (the suites whose code the revert touched), then glm-4.5-air's rows (bench moe: the default tactic listed, auto
# tuning over every tactic of both runners), then deepseek-v3's if time is left.
# Binaries built here with `scripts/gpu_test.sh build` (sm_90 + sm_90a, static cudart), carried as .device/{n,lib}.
set -u
export LD_LIBRARY_PATH=$PWD/.device/lib
name=$(nvidia-smi --query-gpu=name --format=csv,noheader | head -1); echo "$name"
case $name in *H200*) card=h200 ;; *H100*) card=h100 ;; *) card=other ;; esac
o=$OUT/$card; mkdir -p $o
bench() { timeout "$2" stdbuf -oL .device/n/fp4moe bench moe --device cuda --shape "$1" --tokens 1,4,16,64 \
    --tactics default --json $o/$1.json --md $o/$1.md > $o/$1.txt 2>&1; echo "$1 rc=$?"; grep -E "^\| auto|^auto" $o/$1.txt; }
timeout 75 .device/n/test_cuda --gtest_filter='*Decode*:*MoeRoute*' > $o/gpu_test.log 2>&1; echo "test_cuda rc=$?"
grep -E "^\[  (PASSED|FAILED)|tests ran|FAILED" $o/gpu_test.log | head -20
bench glm-4.5-air 60
bench deepseek-v3 40
