#!/usr/bin/env bash
# s40 call 3, any card. Binaries as in call 2 (.device/n = main at 786d02b, .device/u = n + uniform.patch).
# H200: call 2 (main's acceptance run and test_cuda, one A/B round n / u, u's decode tests).
# Other cards: the A/B n / u, two interleaved rounds; u's whole test_cuda; ncu of main's gate_up at glm-4.5-air
# T = 64 (the 2-tile tactic): pipe utilisation (ALU, FMA, tensor), issue, warp stalls.
# Files stay under $OUT/r (no tarball at the end), so a run cut short still returns what it wrote.
set -u
export LD_LIBRARY_PATH=$PWD/.device/lib
name=$(nvidia-smi --query-gpu=name --format=csv,noheader | head -1); echo "$name"
case $name in *H200*) exec bash bench/results/h200/experiments/2026-12-07-s40/call2.sh ;; *H100*) card=h100 ;; *) card=other ;; esac
o=$OUT/r/$card; mkdir -p $o
ab() { # binary round
  for s in glm-4.5-air deepseek-v3 qwen3-30b-a3b; do
    timeout 60 .device/$1/fp4moe bench moe --device cuda --shape $s --tokens 1,4,16,64 --runners cuda.decode \
      --json $o/ab-$1-$s-$2.json > $o/ab-$1-$s-$2.txt 2>&1 || echo "bench $1 $s $2 failed"
  done
}
ab u 1; ab n 1; ab n 2; ab u 2
python3 bench/results/h200/experiments/2026-12-07-s40/ab.py $o n u
timeout 150 .device/u/test_cuda > $o/gpu_test-u.log 2>&1; echo "test_cuda u rc=$?"
grep -E "^\[  (PASSED|FAILED)|FAILED" $o/gpu_test-u.log | head -8
N=/usr/local/cuda/bin/ncu
tac='nt=1 ksplit=1 bulk 2x4 ksteps, 2 tiles per warp, combine kernel'
timeout 120 $N --clock-control none --section SpeedOfLight --section ComputeWorkloadAnalysis --section WarpStateStats \
  --section InstructionStats --metrics smsp__inst_executed.sum,sm__cycles_active.avg \
  -k "regex:moe_gemm" -c 2 .device/n/fp4moe bench moe --device cuda --shape glm-4.5-air --tokens 64 --runners cuda.decode \
  --tactics "$tac" --no-auto --iters 3 --warmup 1 > $o/ncu-glm64.txt 2>&1; echo "ncu rc=$?"
grep -E "moe_gemm_kernel|Duration|DRAM Throughput|Issue Slots Busy|Pipe|Stall|Executed Ipc|inst_executed" $o/ncu-glm64.txt | sed -E 's/ +/ /g' | cut -c1-140 | head -40
