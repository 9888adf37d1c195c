#!/usr/bin/env bash
# s40 call 1, H200 only (another card exits at once): main's issue-4 acceptance run and the ncu pipe counters of
# gate_up at glm-4.5-air T = 64 (the open item of NOTES "at a glance"). Binaries carried as .device/pack.tar.xz
# (.device/n = main's code at 786d02b, the register-3 multiply layout; docs-only commits since).
# Files stay under $OUT/r (no tarball at the end), so a run cut short still returns what it wrote.
set -u
export LD_LIBRARY_PATH=$PWD/.device/lib
name=$(nvidia-smi --query-gpu=name --format=csv,noheader | head -1); echo "$name"
case $name in *H200*) ;; *) echo "not an H200: nothing run"; exit 0 ;; esac
o=$OUT/r/h200; mkdir -p $o
FP4MOE=$PWD/.device/n/fp4moe timeout 240 bash scripts/gpu_bench.sh $o/accept 1,4,16,64 > $o/accept-run.log 2>&1; echo "gpu_bench rc=$?"
python3 bench/results/h200/experiments/2026-12-05-s30/table.py $o/accept
tail -3 $o/accept/acceptance.md
timeout 200 .device/n/test_cuda > $o/gpu_test.log 2>&1; echo "test_cuda rc=$?"
grep -E "^\[  (PASSED|FAILED)|FAILED" $o/gpu_test.log | head -8
N=/usr/local/cuda/bin/ncu
tac='nt=1 ksplit=1 bulk 2x4 ksteps, 2 tiles per warp, combine kernel'
timeout 120 $N --clock-control none --section SpeedOfLight --section ComputeWorkloadAnalysis --section WarpStateStats \
  --section InstructionStats --metrics smsp__inst_executed.sum,sm__cycles_active.avg,smsp__issue_active.avg.pct_of_peak_sustained_active \
  -k "regex:moe_gemm" -c 2 .device/n/fp4moe bench moe --device cuda --shape glm-4.5-air --tokens 64 --runners cuda.decode \
  --tactics "$tac" --no-auto --iters 3 --warmup 1 > $o/ncu-glm64.txt 2>&1; echo "ncu rc=$?"
grep -E "moe_gemm_kernel|Duration|DRAM Throughput|Issue Slots Busy|Pipe|Stall|Executed Ipc" $o/ncu-glm64.txt | sed -E 's/ +/ /g' | cut -c1-140 | head -40
