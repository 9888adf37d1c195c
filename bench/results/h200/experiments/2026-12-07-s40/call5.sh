#!/usr/bin/env bash
# s40 call 5, on the H100 still warm from call 4: u's acceptance-form run (scripts/gpu_bench.sh, for ../../h100/) and
# ncu of u's gate_up and down at glm-4.5-air T = 64 (2-tile tactic) with the pipe utilisation metrics. One tarball at
# the end (the device tool returns at most a few files).
set -u
export LD_LIBRARY_PATH=$PWD/.device/lib
nvidia-smi --query-gpu=name --format=csv,noheader | head -1
o=$OUT/r/h100; mkdir -p $o
FP4MOE=$PWD/.device/u/fp4moe timeout 300 bash scripts/gpu_bench.sh $o/accept 1,4,16,64 > $o/accept-run.log 2>&1
echo "gpu_bench rc=$?"; python3 bench/results/h200/experiments/2026-12-05-s30/table.py $o/accept; tail -3 $o/accept/acceptance.md
N=/usr/local/cuda/bin/ncu
tac='nt=1 ksplit=1 bulk 2x4 ksteps, 2 tiles per warp, combine kernel'
timeout 100 $N --clock-control none --section SpeedOfLight --section ComputeWorkloadAnalysis --section WarpStateStats \
  --section InstructionStats --metrics smsp__inst_executed.sum,sm__inst_executed_pipe_alu.avg.pct_of_peak_sustained_active,sm__inst_executed_pipe_fma.avg.pct_of_peak_sustained_active,sm__inst_executed_pipe_fmaheavy.avg.pct_of_peak_sustained_active,sm__pipe_tensor_cycles_active.avg.pct_of_peak_sustained_active,sm__pipe_alu_cycles_active.avg.pct_of_peak_sustained_active,sm__pipe_fma_cycles_active.avg.pct_of_peak_sustained_active,sm__pipe_fmaheavy_cycles_active.avg.pct_of_peak_sustained_active,sm__pipe_shared_cycles_active.avg.pct_of_peak_sustained_active \
  -k "regex:moe_gemm" -c 2 .device/u/fp4moe bench moe --device cuda --shape glm-4.5-air --tokens 64 \
  --runners cuda.decode --tactics "$tac" --no-auto --iters 3 --warmup 1 > $o/ncu-glm64-u.txt 2>&1; echo "ncu rc=$?"
grep -E "Duration|pipe|Pipe|Stall|Issue Slots|Ipc" $o/ncu-glm64-u.txt | sed -E 's/ +/ /g' | cut -c1-120 | head -40
cd $OUT && tar czf s40-call5.tgz r && rm -rf r
