#!/usr/bin/env bash
# s28 call 7: down-free.patch (.device/d): FP4MOE_DOWN_FREE set = a tactic's "CTAs per SM" register cap applies to
# gate_up only (down keeps its own registers: at 80 it spills). T = 1 / 4, the 6-CTA tactics and the s27 T = 1 auto
# tactic, with and without, three interleaved rounds (split.py: lowest us of the 6-CTA tactics / of the others).
set -u
export LD_LIBRARY_PATH=$PWD/.device/lib
E=bench/results/h200/experiments/2026-12-04-s28
o=$OUT/r; mkdir -p $o
for r in 1 2 3; do for s in glm-4.5-air deepseek-v3 qwen3-30b-a3b; do for f in 0 1; do
  j=$o/df-$s-$f-r$r.json
  if [ $f = 1 ]; then export FP4MOE_DOWN_FREE=1; else unset FP4MOE_DOWN_FREE; fi
  timeout 90 .device/d/fp4moe bench moe --device cuda --shape $s --tokens 1,4 --runners cuda.decode --no-auto \
    --tactics '6 CTAs per SM|nt=1 ksplit=2 bulk 2x4 ksteps, down ksplit=1' --json $j > $o/df-$s-$f-r$r.txt 2>&1
  echo "down-free=$f $s r$r $(python3 $E/split.py $j '6 CTAs')"
done; done; done
unset FP4MOE_DOWN_FREE
cd $OUT && tar czf r.tgz r && rm -rf r
