#!/usr/bin/env bash
# s28 call 1: where the GEMMs' time goes at T <= 4. .device/t = main b690528 + trace.patch (per-warp globaltimer
# marks of gate_up, down and the combine kernel, the graph's last layer of each measurement's last replay, dumped
# to $FP4MOE_TRACE-T<T>-<n>.bin). The auto tactic of each case (s27 call 5), bench moe with that one tactic.
set -u
export LD_LIBRARY_PATH=$PWD/.device/lib
E=bench/results/h200/experiments/2026-12-04-s28
o=$OUT/r; mkdir -p $o
run() { # shape T tactic H I ksg ksd mt
  local s=$1 T=$2 tac=$3; shift 3
  FP4MOE_TRACE=$o/$s timeout 60 .device/t/fp4moe bench moe --device cuda --shape $s --tokens $T --runners cuda.decode \
    --no-auto --tactics "$tac" > $o/$s-T$T.txt 2>&1
  echo "== $s T=$T $(grep -E '^cuda.decode' $o/$s-T$T.txt | awk '{print $(NF-5), $(NF-2)}' | head -1)"
  local last=$(ls $o/$s-T$T-*.bin | sort -V | tail -1)
  python3 $E/trace.py $last "$@"
}
run glm-4.5-air 1 'nt=1 ksplit=2 bulk 2x4 ksteps, down ksplit=1' 4096 1408 2 1 1
run glm-4.5-air 4 'nt=1 ksplit=2 bulk 2x4 ksteps, down ksplit=1, 2 tiles per warp, combine kernel' 4096 1408 2 1 2
run deepseek-v3 1 'nt=1 ksplit=2 bulk 2x4 ksteps, down ksplit=1' 7168 2048 2 1 1
run qwen3-30b-a3b 1 'nt=1 ksplit=4 bulk 2x4 ksteps, down ksplit=2, 6 CTAs per SM' 2048 768 4 2 1
run qwen3-30b-a3b 4 'nt=1 ksplit=1 bulk 2x4 ksteps, combine kernel' 2048 768 1 1 1
run glm-4.5-air 16 'nt=1 ksplit=1 bulk 2x4 ksteps, 2 tiles per warp, combine kernel' 4096 1408 1 1 2
run glm-4.5-air 64 'nt=1 ksplit=1 bulk 2x4 ksteps, 2 tiles per warp' 4096 1408 1 1 2
cd $OUT && tar czf r.tgz r && rm -rf r
