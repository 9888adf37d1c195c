#!/usr/bin/env bash
# s36 call 4: .device/x = main at dc009ef, .device/n = main + five T = 1 tactics whose down ring is as deep as a down
# warp's K run (`..., down bulk SxU ksteps`: all of down's weight copies issued before it waits for gate_up). n's
# decode and routing GPU tests (every tactic, every T and layout), then
# x / n interleaved, two rounds, T = 1, 4, every tactic of each binary (--no-auto); pertac.py: lowest us per tactic.
set -u
export LD_LIBRARY_PATH=$PWD/.device/lib
nvidia-smi --query-gpu=name --format=csv,noheader | head -1
o=$OUT/r; mkdir -p $o
timeout 150 .device/n/test_cuda --gtest_filter='*Decode*:*MoeRoute*' > $o/gpu_test-n.log 2>&1; echo "test_cuda (n) rc=$?"
grep -E "^\[  (PASSED|FAILED)|tests ran|Failure|FAILED" $o/gpu_test-n.log | head -20
for r in 1 2; do for s in glm-4.5-air deepseek-v3 qwen3-30b-a3b; do for b in x n; do
  timeout 60 .device/$b/fp4moe bench moe --device cuda --shape $s --tokens 1,4 --runners cuda.decode --no-auto \
    --json $o/$b-$s-r$r.json > $o/$b-$s-r$r.txt 2>&1 || echo "bench $b $s r$r failed"
done; done; done
for s in glm-4.5-air deepseek-v3 qwen3-30b-a3b; do for b in x n; do
  echo "== $s $b"; python3 bench/results/h200/experiments/2026-12-05-s29/pertac.py $o/$b-$s-r*.json | sort -t: -k2 -n | head -6
  python3 bench/results/h200/experiments/2026-12-05-s29/pertac.py $o/$b-$s-r*.json | grep "down bulk"
done; done
cd $OUT && tar czf r.tgz r && rm -rf r
