#!/usr/bin/env bash
# s35 call 1: routing inside the GEMMs at T = 1 (decode_route, tactics "..., T=1 routed in the GEMMs").
# .device/x = this change. Its decode and routing GPU tests, then T = 1 for every tactic (three rounds, auto in
# the first), all three shapes; pertac.py: lowest us per tactic.
set -u
export LD_LIBRARY_PATH=$PWD/.device/lib
nvidia-smi --query-gpu=name --format=csv,noheader | head -1
o=$OUT/r; mkdir -p $o
timeout 240 .device/x/test_cuda --gtest_filter='*Decode*:*MoeRoute*' > $o/gpu_test-x.log 2>&1; echo "test_cuda (x) rc=$?"
grep -E "^\[  (PASSED|FAILED)|tests ran|Failure|FAILED" $o/gpu_test-x.log | head -20
for r in 1 2 3; do for s in glm-4.5-air deepseek-v3 qwen3-30b-a3b; do
  auto=--no-auto; [ $r = 1 ] && auto=
  timeout 60 .device/x/fp4moe bench moe --device cuda --shape $s --tokens 1 --runners cuda.decode $auto \
    --json $o/x-$s-r$r.json > $o/x-$s-r$r.txt 2>&1 || echo "bench $s r$r failed"
done; done
for s in glm-4.5-air deepseek-v3 qwen3-30b-a3b; do
  echo "== $s"; grep auto $o/x-$s-r1.txt | cut -c1-160
  python3 bench/results/h200/experiments/2026-12-05-s29/pertac.py $o/x-$s-r*.json | sort -t: -k2 -n | head -8
done
cd $OUT && tar czf r.tgz r && rm -rf r
