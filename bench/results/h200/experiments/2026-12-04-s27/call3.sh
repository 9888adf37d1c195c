#!/usr/bin/env bash
# s27 call 3 (NOTES "Next for issue 4" item 2): the one-CTA top-k + plan (1024 threads, 32 warps routing T / 32
# tokens each) at T = 12..64 against top-k on T / 4 CTAs + the plan kernel, now that the logits at T >= 8 are
# short. .device/f = 3e2e398 + fused-max-t.patch (FP4MOE_FUSED_MAX_T: the largest T moe_route_fused takes, 8 in
# main; FP4MOE_ROUTING_ONLY). Routing alone and the whole layer, three interleaved rounds.
set -u
export LD_LIBRARY_PATH=$PWD/.device/lib
E=bench/results/h200/experiments/2026-12-04-s27
o=$OUT/r; mkdir -p $o
T64='nt=1 ksplit=1 bulk 2x4 ksteps, 2 tiles per warp, combine kernel'
for round in 1 2 3; do for s in glm-4.5-air deepseek-v3 qwen3-30b-a3b; do for m in 8 64; do
  j=$o/routing-$s-max$m-r$round.json
  FP4MOE_FUSED_MAX_T=$m FP4MOE_ROUTING_ONLY=1 timeout 60 .device/f/fp4moe bench moe --device cuda --shape $s \
    --tokens 12,16,24,32,48,64 --runners cuda.decode --no-auto --tactics "$T64" --json $j > /dev/null 2>&1
  echo "routing $s max$m r$round $(python3 $E/best.py $j 2>&1 | tail -1)"
  j=$o/layer-$s-max$m-r$round.json
  FP4MOE_FUSED_MAX_T=$m timeout 60 .device/f/fp4moe bench moe --device cuda --shape $s \
    --tokens 16,32,64 --runners cuda.decode --no-auto --tactics "$T64" --json $j > /dev/null 2>&1
  echo "layer $s max$m r$round $(python3 $E/best.py $j 2>&1 | tail -1)"
done; done; done
cd $OUT && tar czf r.tgz r && rm -rf r
