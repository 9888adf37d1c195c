#!/usr/bin/env bash
# s39 call 1: the acceptance run of main (92846c2, kernels of c4664a0: .device/m = fp4moe and test_cuda built from main, carried as .device/pack.tar.xz;
# unpack first) on whatever card is lent: scripts/gpu_bench.sh (every tactic, auto, the torch peer,
# joined tables) into $OUT/r/<card>, then every GPU test.
set -u
export LD_LIBRARY_PATH=$PWD/.device/lib
name=$(nvidia-smi --query-gpu=name --format=csv,noheader | head -1); echo "$name"
case $name in *H200*) card=h200 ;; *) echo "not an H200: main's H100 figures are s38 call 1's; stopping"; exit 3 ;; esac
o=$OUT/r/$card; mkdir -p $o
FP4MOE=$PWD/.device/m/fp4moe timeout 330 bash scripts/gpu_bench.sh $o 1,4,16,64 > $o/decode-run.log 2>&1; echo "bench rc=$?"
python3 bench/results/h200/experiments/2026-12-05-s30/table.py $o
timeout 220 .device/m/test_cuda > $o/gpu_test.log 2>&1; echo "test_cuda rc=$?"
grep -E "^\[  (PASSED|FAILED)|tests ran|FAILED|^\[==========\]" $o/gpu_test.log | head -20
cd $OUT && tar czf r.tgz r && rm -rf r
