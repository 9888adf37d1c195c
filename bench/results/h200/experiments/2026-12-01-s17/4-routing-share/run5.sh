#!/usr/bin/env bash
# s17 call 5: the top-k + plan kernel's share of the T = 1 / 4 layer in the graph (FP4MOE_DIAG=1: it returns at once
# after its first runs, leaving their plan in place).
set -u
d=$(cd "$(dirname "$0")" && pwd)
o=$OUT/g; mkdir -p $o
for round in 1 2; do
for s in glm-4.5-air deepseek-v3 qwen3-30b-a3b; do
  case $s in qwen3-30b-a3b) t='nt=1 ksplit=4 bulk 2x4 ksteps, down ksplit=2';; *) t='nt=1 ksplit=2 bulk 2x4 ksteps, down ksplit=1';; esac
  for diag in 0 1; do
    FP4MOE_DIAG=$diag timeout 100 $d/d/fp4moe bench moe --device cuda --shape $s --tokens 1,4 --runners cuda.decode --tactics "$t" --no-auto > $o/$s-$diag-$round.txt 2>&1
    echo "== $s diag=$diag round $round rc=$?"; grep -E "^cuda\." $o/$s-$diag-$round.txt | sed -E 's/  +/ /g' | cut -c1-120
  done
done
done
cd $OUT && tar czf g.tgz g
