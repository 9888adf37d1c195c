#!/usr/bin/env bash
# s35 call 4 (call 3 cut to fit the device time left after refused starts): .device/x = the change (routing in the
# GEMMs at T = 1). Its decode and routing GPU tests, then T = 1 for every tactic, two rounds (auto in the first),
# all three shapes; pertac.py: lowest us per tactic.
set -u
export LD_LIBRARY_PATH=$PWD/.device/lib
name=$(nvidia-smi --query-gpu=name --format=csv,noheader | head -1); echo "$name"
case $name in *H200*) card=h200 ;; *H100*) card=h100 ;; *) card=other ;; esac
o=$OUT/r/$card; mkdir -p $o
timeout 150 .device/x/test_cuda --gtest_filter='*Decode*:*MoeRoute*' > $o/gpu_test.log 2>&1; echo "test_cuda rc=$?"
grep -E "^\[  (PASSED|FAILED)|tests ran|Failure|FAILED|^\[==========\]" $o/gpu_test.log | head -20
for r in 1 2; do for s in glm-4.5-air deepseek-v3 qwen3-30b-a3b; do
  auto=--no-auto; [ $r = 1 ] && auto=
  timeout 40 .device/x/fp4moe bench moe --device cuda --shape $s --tokens 1 --runners cuda.decode $auto \
    --json $o/t1-$s-r$r.json > $o/t1-$s-r$r.txt 2>&1 || echo "bench $s r$r failed"
done; done
for s in glm-4.5-air deepseek-v3 qwen3-30b-a3b; do
  echo "== $s"; grep auto $o/t1-$s-r1.txt | cut -c1-170
  python3 bench/results/h200/experiments/2026-12-05-s29/pertac.py $o/t1-$s-r*.json | sort -t: -k2 -n | head -8
done
cd $OUT && tar czf r.tgz r && rm -rf r
