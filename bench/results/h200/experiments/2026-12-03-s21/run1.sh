#!/usr/bin/env bash
# Session 21 call 1: tests of t (decode grid bound, router prefetch, plan bases), ncu m vs t, decode A/B.
set -u
export LD_LIBRARY_PATH=$PWD/.device/lib
D=$OUT/r; mkdir -p $D
nvidia-smi --query-gpu=name,clocks.sm,power.draw --format=csv > $D/gpu.txt 2>&1
( cd $D && timeout 280 $OLDPWD/.device/t/test_cuda --gtest_brief=1 > tests.txt 2>&1; echo "rc=$?" >> tests.txt )
tail -4 $D/tests.txt
for shape in deepseek-v3 glm-4.5-air; do for b in m t; do
  timeout 60 ncu -k 'regex:router_logits|plan_bases' -c 6 --metrics gpu__time_duration.sum .device/$b/fp4moe bench moe --device cuda --shape $shape --tokens 4096 --runners cuda.grouped --tactics 'wg=3, down bn=128 stages=4 rows=256]' --no-auto > $D/ncu-$shape-$b.txt 2>&1
  echo "ncu $shape $b rc=$? $(grep -oE '(router_logits_wgmma_kernel<[0-9, ]+>|moe_plan_bases_kernel)|us +[0-9.]+$' $D/ncu-$shape-$b.txt | tr -s ' ' | tr '\n' ' ')"
done; done
for r in 1 2; do
  SHAPES="glm-4.5-air deepseek-v3 qwen3-30b-a3b" TOKENS=1,4,16,64 RUNNER=cuda.decode TACTICS='ksplit=1 bulk 2x4 ksteps|2 tiles per warp|CTAs per SM' bash scripts/gpu_ab.sh $D/dec-r$r .device/m/fp4moe .device/t/fp4moe > $D/dec-r$r.log 2>&1
done
cd $OUT && tar czf r.tgz r
