#!/usr/bin/env bash
# s29 call 1: CTAs of 8 warps (tactics "..., 8 warps per CTA": 3 or 2 CTAs per SM) against the 4-warp tactics, built
# from the working tree (.device/n): every GPU test, the 8-warp kernels' resources, then per shape the s28 tactic
# sets plus every 8-warp tactic, T = 1, 4, 16, 64, three rounds (split.py: lowest us with "8 warps" / without).
set -u
export LD_LIBRARY_PATH=$PWD/.device/lib
E=bench/results/h200/experiments/2026-12-05-s29
o=$OUT/r; mkdir -p $o
timeout 300 .device/n/test_cuda > $o/gpu_test.log 2>&1; echo "test_cuda rc=$?"
grep -E "^\[  (PASSED|FAILED)|tests ran|Failure|FAILED" $o/gpu_test.log | head -20
$(command -v cuobjdump || echo /usr/local/cuda/bin/cuobjdump) -res-usage .device/n/fp4moe > $o/res.txt 2>&1
grep -A1 "moe_gemm_kernel" $o/res.txt | grep -o "REG:[0-9]* STACK:[0-9]* SHARED:[0-9]* LOCAL:[0-9]*" | sort | uniq -c
declare -A TAC=(
  [glm-4.5-air]='nt=1 ksplit=2 bulk 2x4 ksteps, down ksplit=1|nt=1 ksplit=1 bulk 2x4 ksteps, 2 tiles per warp|8 warps'
  [deepseek-v3]='nt=1 ksplit=2 bulk 2x4 ksteps, down ksplit=1|nt=1 ksplit=1 bulk 2x4 ksteps, 2 tiles per warp|8 warps'
  [qwen3-30b-a3b]='nt=1 ksplit=4 bulk 2x4 ksteps, down ksplit=2, 6 CTAs|nt=1 ksplit=1 bulk 2x4 ksteps, combine kernel|nt=1 ksplit=1 bulk 2x4 ksteps, 2 tiles per warp, combine kernel|8 warps')
for r in 1 2 3; do for s in glm-4.5-air deepseek-v3 qwen3-30b-a3b; do
  j=$o/w-$s-r$r.json
  timeout 150 .device/n/fp4moe bench moe --device cuda --shape $s --tokens 1,4,16,64 --runners cuda.decode \
    --no-auto --tactics "${TAC[$s]}" --json $j > $o/w-$s-r$r.txt 2>&1
  echo "8warps/other $s r$r $(python3 $E/split.py $j '8 warps')"
done; done
grep -h "8 warps" $o/w-*-r1.txt | cut -c1-150
cd $OUT && tar czf r.tgz r && rm -rf r
