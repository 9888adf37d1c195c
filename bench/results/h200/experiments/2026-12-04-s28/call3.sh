#!/usr/bin/env bash
# s28 call 3: (a) the cost of the trace itself: main b690528 (.device/m) against the trace build (.device/t:
# trace-stagger.patch, no FP4MOE_TRACE: marks taken, nothing dumped), glm-4.5-air T = 1 / 4, three interleaved rounds;
# (b) stagger.patch (.device/s): FP4MOE_STAGGER bit 0 gate_up, bit 1 down: each warp issues only its first ring stage
# up front and the others once it has landed (less queued at the start, so every warp's first stage lands sooner);
# modes 0 / 1 / 3, the auto tactics of s27 call 5 (best row per T), three interleaved rounds; (c) traces with stagger 3.
set -u
export LD_LIBRARY_PATH=$PWD/.device/lib
E=bench/results/h200/experiments/2026-12-04-s28
o=$OUT/r; mkdir -p $o
declare -A TAC=(
  [glm-4.5-air]='nt=1 ksplit=2 bulk 2x4 ksteps, down ksplit=1|nt=1 ksplit=1 bulk 2x4 ksteps, 2 tiles per warp'
  [deepseek-v3]='nt=1 ksplit=2 bulk 2x4 ksteps, down ksplit=1|nt=1 ksplit=1 bulk 2x4 ksteps, 2 tiles per warp'
  [qwen3-30b-a3b]='nt=1 ksplit=4 bulk 2x4 ksteps, down ksplit=2, 6 CTAs|nt=1 ksplit=1 bulk 2x4 ksteps, combine kernel|nt=1 ksplit=1 bulk 2x4 ksteps, 2 tiles per warp, combine kernel')
for r in 1 2 3; do for b in m t; do
  j=$o/cost-$b-r$r.json
  timeout 60 .device/$b/fp4moe bench moe --device cuda --shape glm-4.5-air --tokens 1,4 --runners cuda.decode --no-auto \
    --tactics 'nt=1 ksplit=2 bulk 2x4 ksteps, down ksplit=1' --json $j > /dev/null 2>&1
  echo "cost $b r$r $(python3 $E/best.py $j)"
done; done
for r in 1 2 3; do for s in glm-4.5-air deepseek-v3 qwen3-30b-a3b; do for m in 0 1 3; do
  j=$o/stagger-$s-$m-r$r.json
  FP4MOE_STAGGER=$m timeout 90 .device/s/fp4moe bench moe --device cuda --shape $s --tokens 1,4,16,64 --runners cuda.decode \
    --no-auto --tactics "${TAC[$s]}" --json $j > /dev/null 2>&1
  echo "stagger $s mode $m r$r $(python3 $E/best.py $j)"
done; done; done
for s in glm-4.5-air qwen3-30b-a3b; do
  FP4MOE_STAGGER=3 FP4MOE_TRACE=$o/st-$s timeout 60 .device/t/fp4moe bench moe --device cuda --shape $s --tokens 1 \
    --runners cuda.decode --no-auto --tactics "${TAC[$s]}" > $o/st-$s.txt 2>&1
done
cd $OUT && tar czf r.tgz r && rm -rf r
