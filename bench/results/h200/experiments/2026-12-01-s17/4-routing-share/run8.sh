#!/usr/bin/env bash
# s17 call 8: where the top-k + plan kernel's 5-7 us at T = 1 go: FP4MOE_DIAG=0 main, 1 its body skipped (the plan
# of its first runs stays), 2 route_token replaced by fixed ids (scores, top-k and weights skipped; plan kept).
set -u
d=$(cd "$(dirname "$0")" && pwd)
o=$OUT/x; mkdir -p $o
for round in 1 2; do
for s in qwen3-30b-a3b glm-4.5-air; do
  case $s in qwen3-30b-a3b) t='nt=1 ksplit=4 bulk 2x4 ksteps, down ksplit=2';; *) t='nt=1 ksplit=2 bulk 2x4 ksteps, down ksplit=1';; esac
  for diag in 0 1 2; do
    FP4MOE_DIAG=$diag timeout 60 $d/d/fp4moe bench moe --device cuda --shape $s --tokens 1 --runners cuda.decode --tactics "$t" --no-auto > $o/$s-$diag-$round.txt 2>&1
    printf "%s diag=%s r%s: " $s $diag $round; grep -E "^cuda\.decode" $o/$s-$diag-$round.txt | sed -E 's/  +/ /g' | awk '{ n=NF; printf "%s/%s ", $(n-7), $(n-6) }'; echo
  done
done
done
cd $OUT && tar czf x.tgz x
