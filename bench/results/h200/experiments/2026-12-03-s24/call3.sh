#!/usr/bin/env bash
# s24 call 3: where the fixed ~30 us of the small-T layer goes. nsys traces of main (.device/t) at glm-4.5-air T = 1, 4,
# 64 and qwen3-30b-a3b T = 1, 4 with each T's auto tactic, CUDA-graph nodes traced one by one: per kernel of the layer
# its start relative to the layer's first kernel and its duration (cuda_gpu_trace).
set -u
export LD_LIBRARY_PATH=$PWD/.device/lib
o=$OUT/r; mkdir -p $o
which nsys ncu; nsys --version
A='nt=1 ksplit=2 bulk 2x4 ksteps, down ksplit=1, 2 tiles per warp, combine kernel'
B='nt=1 ksplit=1 bulk 2x4 ksteps, 2 tiles per warp, combine kernel'
Q1='nt=1 ksplit=4 bulk 2x4 ksteps, down ksplit=2, 6 CTAs per SM'
Q4='nt=1 ksplit=1 bulk 2x4 ksteps, combine kernel'
G1='nt=1 ksplit=2 bulk 2x4 ksteps, down ksplit=1'
prof() { # tag shape T tactic
  timeout 120 nsys profile -t cuda --cuda-graph-trace=node -o $o/$1 --force-overwrite true \
    .device/t/fp4moe bench moe --device cuda --shape $2 --tokens $3 --runners cuda.decode --no-auto --tactics "$4" --iters 20 --warmup 5 > $o/$1.txt 2>&1
  echo "$1 rc=$?"
  timeout 120 nsys stats --report cuda_gpu_trace --format csv --output $o/$1 $o/$1.nsys-rep > /dev/null 2>&1; echo "stats rc=$?"
  rm -f $o/$1.sqlite $o/$1.nsys-rep
}
prof glm1 glm-4.5-air 1 "$G1"
prof glm4 glm-4.5-air 4 "$A"
prof glm64 glm-4.5-air 64 "$B"
prof qw1 qwen3-30b-a3b 1 "$Q1"
prof qw4 qwen3-30b-a3b 4 "$Q4"
ls -la $o
cd $OUT && tar czf r.tgz r && rm -rf r
