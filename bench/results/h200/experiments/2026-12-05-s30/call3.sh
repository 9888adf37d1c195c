#!/usr/bin/env bash
# s30 call 3, the landing check of d5353a0 (main with the combine's batched slot loads; .device/n, built here with
# scripts/gpu_test.sh build): the decode acceptance run first (scripts/gpu_bench.sh: every tactic, auto, the torch
# peer, joined tables), then every GPU test, into $OUT/<card> (h200 or h100, from nvidia-smi: the lent machine may be
# either). Files are written straight under $OUT (no tarball), so a run cut short by the session's device budget
# still returns what it finished. The limits fit the 451 s of device time left (test_cuda gets what remains: the
# decode tests come first in it; x, a superset of these kernels, passed 47/47 in call 2).
set -u
export LD_LIBRARY_PATH=$PWD/.device/lib
name=$(nvidia-smi --query-gpu=name --format=csv,noheader | head -1); echo "$name"
case $name in *H200*) card=h200 ;; *H100*) card=h100 ;; *) card=other ;; esac
o=$OUT/$card; mkdir -p $o
FP4MOE=$PWD/.device/n/fp4moe timeout 235 bash scripts/gpu_bench.sh $o 1,4,16,64 > $o/decode-run.log 2>&1; echo "bench rc=$?"
grep -E "^\| auto" $o/*.md | cut -c1-200
timeout 75 .device/n/test_cuda > $o/gpu_test.log 2>&1; echo "test_cuda rc=$?"
grep -E "^\[  (PASSED|FAILED)|tests ran|FAILED" $o/gpu_test.log | head -20
