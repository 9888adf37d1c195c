#!/usr/bin/env bash
# s24 call 11: T = 64 whole layer, split-K router (FP4MOE_ROUTER_DMMA_MIN_T=65) vs the tensor-core router (=1), three
# interleaved rounds, one tactic (.device/r = call 9's binary): is call 10's slower T = 64 the router or the machine?
set -u
export LD_LIBRARY_PATH=$PWD/.device/lib
o=$OUT/r; mkdir -p $o
T='nt=1 ksplit=1 bulk 2x4 ksteps, 2 tiles per warp, combine kernel'
for round in 1 2 3; do for s in glm-4.5-air deepseek-v3; do for n in 65 1; do
  FP4MOE_ROUTER_DMMA_MIN_T=$n timeout 30 .device/r/fp4moe bench moe --device cuda --shape $s --tokens 16,64 --runners cuda.decode --no-auto --tactics "$T" --json $o/b-$s-n$n-r$round.json > /dev/null 2>&1
  echo "$s n$n r$round $(python3 -c "import json;r=json.load(open('$o/b-$s-n$n-r$round.json'));r=r['rows'] if isinstance(r,dict) else r;print(' '.join('%d:%.1f'%(x['tokens'],x['us']) for x in r))")"
done; done; done
cd $OUT && tar czf r.tgz r && rm -rf r
