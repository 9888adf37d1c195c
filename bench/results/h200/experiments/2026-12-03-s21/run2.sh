#!/usr/bin/env bash
# Session 21 call 2: router + plan-bases ncu m vs t, prefill layer A/B m vs t (two rounds).
set -u
export LD_LIBRARY_PATH=$PWD/.device/lib
D=$OUT/r; mkdir -p $D
TAC='stages=6 rows=192 wg=3, down bn=128 stages=4'
for shape in deepseek-v3 glm-4.5-air; do for b in m t; do
  timeout 70 ncu -k 'regex:router_logits|plan_bases' -c 6 --metrics gpu__time_duration.sum .device/$b/fp4moe bench moe --device cuda --shape $shape --tokens 4096 --runners cuda.grouped --tactics "$TAC" --no-auto > $D/ncu-$shape-$b.txt 2>&1
  echo "ncu $shape $b rc=$? $(grep -oE '(router_logits_wgmma_kernel<[0-9, ]+>|moe_plan_bases_kernel)|us +[0-9.]+$' $D/ncu-$shape-$b.txt | tr -s ' ' | tr '\n' ' ')"
done; done
for r in 1 2; do
  SHAPES="deepseek-v3 glm-4.5-air" TOKENS=4096,16384 TACTICS='wg=3' TIMEOUT=100 bash scripts/gpu_ab.sh $D/pre-r$r .device/m/fp4moe .device/t/fp4moe > $D/pre-r$r.log 2>&1
done
cd $OUT && tar czf r.tgz r
