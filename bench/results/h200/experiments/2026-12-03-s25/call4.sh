#!/usr/bin/env bash
# s25 call 4: is the routing CTA bound by instruction fetch? .device/n = call 3's build + warm.patch: with
# FP4MOE_WARM=1 the two-kernel path's top-k + plan CTA first runs the same (out-of-line) routing code on the
# stale logits into shared-memory dummies BEFORE griddepcontrol.wait, then for real. Marks of both runs; routing
# alone and whole layer, warm vs not, two interleaved rounds.
set -u
export LD_LIBRARY_PATH=$PWD/.device/lib
E=bench/results/h200/experiments/2026-12-03-s25
o=$OUT/r; mkdir -p $o
export FP4MOE_TWO_KERNELS=1
T1='nt=1 ksplit=2 bulk 2x4 ksteps, down ksplit=1'
for s in glm-4.5-air deepseek-v3 qwen3-30b-a3b; do for w in 0 1; do
  if [ $w = 1 ]; then export FP4MOE_WARM=1; else unset FP4MOE_WARM; fi
  FP4MOE_ROUTING_ONLY=1 timeout 60 .device/n/fp4moe bench moe --device cuda --shape $s --tokens 1 --runners cuda.decode \
    --no-auto --tactics "$T1" --iters 20 --warmup 3 > $o/m-$s-$w.txt 2>&1
  echo "== $s warm=$w"; grep RPMARK $o/m-$s-$w.txt | tail -4
done; done
for round in 1 2; do for s in glm-4.5-air deepseek-v3 qwen3-30b-a3b; do for w in 0 1; do
  if [ $w = 1 ]; then export FP4MOE_WARM=1; else unset FP4MOE_WARM; fi
  j=$o/ro-$s-w$w-r$round.json
  FP4MOE_ROUTING_ONLY=1 timeout 60 .device/n/fp4moe bench moe --device cuda --shape $s --tokens 1,2,4,8 \
    --runners cuda.decode --no-auto --tactics "$T1" --json $j > /dev/null 2>&1
  echo "routing $s warm=$w r$round $(python3 $E/best.py $j 2>&1 | tail -1)"
  j=$o/l-$s-w$w-r$round.json
  timeout 60 .device/n/fp4moe bench moe --device cuda --shape $s --tokens 1,2,4,8 \
    --runners cuda.decode --no-auto --tactics "$T1" --json $j > /dev/null 2>&1
  echo "layer $s warm=$w r$round $(python3 $E/best.py $j 2>&1 | tail -1)"
done; done; done
cd $OUT && tar czf r.tgz r && rm -rf r
