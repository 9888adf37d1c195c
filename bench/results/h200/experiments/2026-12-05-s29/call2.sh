#!/usr/bin/env bash
# s29 call 2, the landing check of da982bd (.device/n, built here with scripts/gpu_test.sh build): every GPU test;
# the combine's batched slot loads against call 1's binary (.device/m: the same GEMM kernels, the old slot loop) on
# the T >= 4 favourite (combine kernel) and the s28 T = 1 tactic (fused combine), two interleaved rounds (best.py:
# lowest us per T); then the decode acceptance run (scripts/gpu_bench.sh: every tactic, auto, the torch peer,
# joined tables) into $OUT/r/h200, which becomes bench/results/h200/.
set -u
export LD_LIBRARY_PATH=$PWD/.device/lib
E=bench/results/h200/experiments/2026-12-05-s29
o=$OUT/r; mkdir -p $o/h200
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader
timeout 200 .device/n/test_cuda > $o/h200/gpu_test.log 2>&1; echo "test_cuda rc=$?"
grep -E "^\[  (PASSED|FAILED)|tests ran|FAILED" $o/h200/gpu_test.log | head -20
TAC='nt=1 ksplit=1 bulk 2x4 ksteps, 2 tiles per warp, combine kernel|nt=1 ksplit=2 bulk 2x4 ksteps, down ksplit=1, 6 CTAs'
for r in 1 2; do for s in glm-4.5-air deepseek-v3 qwen3-30b-a3b; do for b in m n; do
  j=$o/ab-$s-$b-r$r.json
  timeout 60 .device/$b/fp4moe bench moe --device cuda --shape $s --tokens 1,4,16,64 --runners cuda.decode \
    --no-auto --tactics "$TAC" --json $j > $o/ab-$s-$b-r$r.txt 2>&1
  echo "ab $s $b r$r $(python3 $E/pertac.py $j | tr '\n' ' ')"
done; done; done
FP4MOE=$PWD/.device/n/fp4moe timeout 330 bash scripts/gpu_bench.sh $o/h200 1,4,16,64 > $o/h200/decode-run.log 2>&1; echo "bench rc=$?"
grep -E "^\| auto" $o/h200/*.md | cut -c1-200
cd $OUT && tar czf r.tgz r && rm -rf r
