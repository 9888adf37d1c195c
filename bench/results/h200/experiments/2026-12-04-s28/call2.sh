#!/usr/bin/env bash
# s28 call 2: the same traces as call 1 from a build whose marks live in shared memory (trace.patch as committed:
# call 1's marks in registers added registers and slowed every case). Each case: bench moe with the listed
# tactic prefix (every tactic it matches runs; bins are numbered per measurement, two per tactic, in row order).
set -u
export LD_LIBRARY_PATH=$PWD/.device/lib
o=$OUT/r; mkdir -p $o
run() { # shape T tactic-prefix
  FP4MOE_TRACE=$o/$1 timeout 60 .device/t/fp4moe bench moe --device cuda --shape $1 --tokens $2 --runners cuda.decode \
    --no-auto --tactics "$3" > $o/$1-T$2.txt 2>&1
  echo "== $1 T=$2"; grep -E '^cuda.decode' $o/$1-T$2.txt | cut -c1-150
}
run glm-4.5-air 1 'nt=1 ksplit=2 bulk 2x4 ksteps, down ksplit=1'
run glm-4.5-air 4 'nt=1 ksplit=2 bulk 2x4 ksteps, down ksplit=1, 2 tiles per warp, combine kernel'
run deepseek-v3 1 'nt=1 ksplit=2 bulk 2x4 ksteps, down ksplit=1'
run qwen3-30b-a3b 1 'nt=1 ksplit=4 bulk 2x4 ksteps, down ksplit=2'
run qwen3-30b-a3b 4 'nt=1 ksplit=1 bulk 2x4 ksteps, combine kernel'
cd $OUT && tar czf r.tgz r && rm -rf r
