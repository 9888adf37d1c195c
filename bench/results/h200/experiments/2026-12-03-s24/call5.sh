#!/usr/bin/env bash
# s24 call 5: stage ablation of the whole-layer graph (.device/s = main + stages.patch; wrong outputs below 3, for
# timing only). FP4MOE_STAGES = 0: routing only (logits, top-k + plan); 1: + gate_up; 2: + down; 3 (default): + the
# combine kernel. The differences are each stage's marginal cost inside the PDL-chained graph.
set -u
export LD_LIBRARY_PATH=$PWD/.device/lib
o=$OUT/r; mkdir -p $o
TAC='combine kernel|nt=1 ksplit=2 bulk 2x4 ksteps, down ksplit=1|6 CTAs per SM'
for round in 1 2; do for s in glm-4.5-air deepseek-v3 qwen3-30b-a3b; do for st in 0 1 2 3; do
  FP4MOE_STAGES=$st timeout 60 .device/s/fp4moe bench moe --device cuda --shape $s --tokens 1,4,16,64 --runners cuda.decode --no-auto --tactics "$TAC" \
    --json $o/b-$s-s$st-r$round.json > $o/b-$s-s$st-r$round.txt 2>&1; echo "$s s$st $round rc=$?"
done; done; done
cd $OUT && tar czf r.tgz r && rm -rf r
