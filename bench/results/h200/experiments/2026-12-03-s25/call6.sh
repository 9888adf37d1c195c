#!/usr/bin/env bash
# s25 call 6: route_token rewritten (ballot argmax, weight sum inside the rounds, in-register group stage, unrolled
# softmax exps; 32-bit mask atomics; a 256-thread top-k + plan CTA up to T = 8). .device/m = this tree's build
# (fp4moe, test_cuda); .device/n = the same + routing-only.patch + FP4MOE_TWO_KERNELS (two-kernel path);
# .device/o = 83972f8 + routing-only.patch. GPU tests, then routing alone and whole layer: old, new two-kernel,
# new one-launch, three interleaved rounds, T = 1, 2, 4, 8; then old vs new at T = 16 and 64 (one tactic).
set -u
export LD_LIBRARY_PATH=$PWD/.device/lib
E=bench/results/h200/experiments/2026-12-03-s25
o=$OUT/r; mkdir -p $o
timeout 260 .device/m/test_cuda > $o/gpu_test.log 2>&1; echo "test_cuda rc=$?"
grep -E "^\[  (PASSED|FAILED)|tests ran|Failure" $o/gpu_test.log | head -20
T1='nt=1 ksplit=2 bulk 2x4 ksteps, down ksplit=1'
run() { # label binary env...
  local label=$1 b=$2; shift 2
  for mode in routing layer; do
    local j=$o/$mode-$s-$label-r$round.json
    if [ $mode = routing ]; then env FP4MOE_ROUTING_ONLY=1 "$@" timeout 60 .device/$b/fp4moe bench moe --device cuda --shape $s \
      --tokens 1,2,4,8 --runners cuda.decode --no-auto --tactics "$T1" --json $j > /dev/null 2>&1
    else env "$@" timeout 60 .device/$b/fp4moe bench moe --device cuda --shape $s \
      --tokens 1,2,4,8 --runners cuda.decode --no-auto --tactics "$T1" --json $j > /dev/null 2>&1; fi
    echo "$mode $s $label r$round $(python3 $E/best.py $j 2>&1 | tail -1)"
  done
}
for round in 1 2 3; do for s in glm-4.5-air deepseek-v3 qwen3-30b-a3b; do
  run old o X=1
  run two n FP4MOE_TWO_KERNELS=1
  run one n X=1
done; done
T64='nt=1 ksplit=1 bulk 2x4 ksteps, 2 tiles per warp, combine kernel'
for round in 1 2; do for s in glm-4.5-air deepseek-v3 qwen3-30b-a3b; do for b in o n; do
  j=$o/big-$s-$b-r$round.json
  FP4MOE_ROUTING_ONLY=1 timeout 60 .device/$b/fp4moe bench moe --device cuda --shape $s --tokens 16,64 --runners cuda.decode \
    --no-auto --tactics "$T64" --json ${j%.json}-routing.json > /dev/null 2>&1
  timeout 60 .device/$b/fp4moe bench moe --device cuda --shape $s --tokens 16,64 --runners cuda.decode \
    --no-auto --tactics "$T64" --json $j > /dev/null 2>&1
  echo "T16/64 $s $b r$round routing $(python3 $E/best.py ${j%.json}-routing.json 2>&1 | tail -1) layer $(python3 $E/best.py $j 2>&1 | tail -1)"
done; done; done
cd $OUT && tar czf r.tgz r && rm -rf r
