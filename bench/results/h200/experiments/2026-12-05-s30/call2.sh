#!/usr/bin/env bash
# s30 call 2: what da982bd built and 31cf9b8 backed out, measured (NOTES "Next for issue 4", item 0). Two builds:
# .device/n = main (dcea732: the kernels of 31cf9b8), .device/x = main + da982bd's diff of moe_decode.cu and decode_device.cuh (the combine
# kernel's and the fused combine's slot loads in batches of 8 before the adds; rings of 2x2, 3x2, 2x3 K steps for
# the 2-tile tactics). x's GPU tests, then per shape both binaries interleaved, three rounds, T = 1, 4, 16, 64, the
# tactics that combine (fused at T = 1, the combine kernel above) and every 2-tile ring; pertac.py: lowest us per
# tactic and T for each binary (s29's script; the call ran an identical copy kept here then).
set -u
export LD_LIBRARY_PATH=$PWD/.device/lib
o=$OUT/r; mkdir -p $o
timeout 200 .device/x/test_cuda > $o/gpu_test-x.log 2>&1; echo "test_cuda (x) rc=$?"
grep -E "^\[  (PASSED|FAILED)|tests ran|Failure|FAILED" $o/gpu_test-x.log | head -20
declare -A TAC=(
  [glm-4.5-air]='nt=1 ksplit=2 bulk 2x4 ksteps, down ksplit=1|2 tiles per warp, combine kernel'
  [deepseek-v3]='nt=1 ksplit=2 bulk 2x4 ksteps, down ksplit=1|2 tiles per warp, combine kernel'
  [qwen3-30b-a3b]='nt=1 ksplit=4 bulk 2x4 ksteps, down ksplit=2, 6 CTAs|2 tiles per warp, combine kernel|nt=1 ksplit=1 bulk 2x4 ksteps, combine kernel')
for r in 1 2 3; do for s in glm-4.5-air deepseek-v3 qwen3-30b-a3b; do for b in n x; do
  timeout 100 .device/$b/fp4moe bench moe --device cuda --shape $s --tokens 1,4,16,64 --runners cuda.decode \
    --no-auto --tactics "${TAC[$s]}" --json $o/$b-$s-r$r.json > $o/$b-$s-r$r.txt 2>&1 || echo "bench $b $s r$r failed"
done; done; done
for s in glm-4.5-air deepseek-v3 qwen3-30b-a3b; do for b in n x; do
  echo "== $s $b"; python3 bench/results/h200/experiments/2026-12-05-s29/pertac.py $o/$b-$s-r*.json
done; done
cd $OUT && tar czf r.tgz r && rm -rf r
