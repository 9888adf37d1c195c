#!/usr/bin/env bash
# s35 call 3 (calls 1 and 2 in one, the device time left after refused starts did not allow both): .device/x = the
# change (routing in the GEMMs at T = 1, tactics "..., T=1 routed in the GEMMs"). Its decode and routing GPU tests,
# scripts/gpu_bench.sh (every tactic, auto, the torch peer) into $OUT/r/<card>, then a second round of T = 1 for
# every tactic; pertac.py: lowest us per tactic at T = 1 over both.
set -u
export LD_LIBRARY_PATH=$PWD/.device/lib
name=$(nvidia-smi --query-gpu=name --format=csv,noheader | head -1); echo "$name"
case $name in *H200*) card=h200 ;; *H100*) card=h100 ;; *) card=other ;; esac
o=$OUT/r/$card; mkdir -p $o
timeout 150 .device/x/test_cuda --gtest_filter='*Decode*:*MoeRoute*' > $o/gpu_test.log 2>&1; echo "test_cuda rc=$?"
grep -E "^\[  (PASSED|FAILED)|tests ran|Failure|FAILED|^\[==========\]" $o/gpu_test.log | head -20
FP4MOE=$PWD/.device/x/fp4moe timeout 330 bash scripts/gpu_bench.sh $o 1,4,16,64 > $o/decode-run.log 2>&1; echo "bench rc=$?"
python3 bench/results/h200/experiments/2026-12-05-s30/table.py $o
for s in glm-4.5-air deepseek-v3 qwen3-30b-a3b; do
  timeout 40 .device/x/fp4moe bench moe --device cuda --shape $s --tokens 1 --runners cuda.decode --no-auto \
    --json $o/t1-$s-r2.json > $o/t1-$s-r2.txt 2>&1 || echo "bench $s r2 failed"
  echo "== $s"; python3 bench/results/h200/experiments/2026-12-05-s29/pertac.py $o/$s.json $o/t1-$s-r2.json | sort -t: -k2 -n | head -8
done
cd $OUT && tar czf r.tgz r && rm -rf r
