#!/usr/bin/env bash
# s30 call 1, the landing check of dcea732 (.device/n, built here with scripts/gpu_test.sh build's build-gpu/):
# every GPU test, then the decode acceptance run (scripts/gpu_bench.sh: every tactic, auto, the torch peer, joined
# tables) into $OUT/r/h200. (s29 prepared it as its call 2; no GPU machine could be started then.)
set -u
export LD_LIBRARY_PATH=$PWD/.device/lib
o=$OUT/r; mkdir -p $o/h200
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader
timeout 150 .device/n/test_cuda > $o/h200/gpu_test.log 2>&1; echo "test_cuda rc=$?"
grep -E "^\[  (PASSED|FAILED)|tests ran|FAILED" $o/h200/gpu_test.log | head -20
FP4MOE=$PWD/.device/n/fp4moe timeout 320 bash scripts/gpu_bench.sh $o/h200 1,4,16,64 > $o/h200/decode-run.log 2>&1; echo "bench rc=$?"
grep -E "^\| auto" $o/h200/*.md | cut -c1-200
cd $OUT && tar czf r.tgz r && rm -rf r
