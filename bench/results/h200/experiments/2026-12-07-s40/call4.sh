#!/usr/bin/env bash
# s40 call 4, any card. Binaries as in call 2 (.device/n = main at 786d02b, .device/u = n + uniform.patch).
# (1) u's decode tests (test_cuda --gtest_filter=*Decode*: every routing rule, both layouts, every tactic);
# (2) the A/B n / u (cuda.decode, every tactic + auto, T = 1/4/16/64, three shapes; H200 one round, else two,
# interleaved); (3) H200: the acceptance run of u (scripts/gpu_bench.sh); other cards: ncu of gate_up (n and u) at
# glm-4.5-air T = 64, 2-tile tactic: pipes, issue, stalls.
# Files stay under $OUT/r (no tarball at the end), so a run cut short still returns what it wrote.
set -u
export LD_LIBRARY_PATH=$PWD/.device/lib
name=$(nvidia-smi --query-gpu=name --format=csv,noheader | head -1); echo "$name"
case $name in *H200*) card=h200 ;; *H100*) card=h100 ;; *) card=other ;; esac
o=$OUT/r/$card; mkdir -p $o
timeout 90 .device/u/test_cuda --gtest_filter='*Decode*' > $o/gpu_test-u.log 2>&1; echo "test_cuda u rc=$?"
grep -E "^\[  (PASSED|FAILED)|FAILED" $o/gpu_test-u.log | head -8
ab() { # binary round
  for s in glm-4.5-air deepseek-v3 qwen3-30b-a3b; do
    timeout 60 .device/$1/fp4moe bench moe --device cuda --shape $s --tokens 1,4,16,64 --runners cuda.decode \
      --json $o/ab-$1-$s-$2.json > $o/ab-$1-$s-$2.txt 2>&1 || echo "bench $1 $s $2 failed"
  done
}
if [ $card = h200 ]; then ab u 1; ab n 1; else ab u 1; ab n 1; ab n 2; ab u 2; fi
python3 bench/results/h200/experiments/2026-12-07-s40/ab.py $o n u
if [ $card = h200 ]; then
  FP4MOE=$PWD/.device/u/fp4moe timeout 260 bash scripts/gpu_bench.sh $o/accept 1,4,16,64 > $o/accept-run.log 2>&1
  echo "gpu_bench rc=$?"; python3 bench/results/h200/experiments/2026-12-05-s30/table.py $o/accept; tail -3 $o/accept/acceptance.md
else
  N=/usr/local/cuda/bin/ncu
  tac='nt=1 ksplit=1 bulk 2x4 ksteps, 2 tiles per warp, combine kernel'
  for b in n u; do
    timeout 90 $N --clock-control none --section SpeedOfLight --section ComputeWorkloadAnalysis --section WarpStateStats \
      --section InstructionStats --metrics smsp__inst_executed.sum,sm__cycles_active.avg \
      -k "regex:moe_gemm" -c 2 .device/$b/fp4moe bench moe --device cuda --shape glm-4.5-air --tokens 64 \
      --runners cuda.decode --tactics "$tac" --no-auto --iters 3 --warmup 1 > $o/ncu-glm64-$b.txt 2>&1; echo "ncu $b rc=$?"
    grep -E "Duration|DRAM Throughput|Issue Slots Busy|Executed Ipc A|inst_executed" $o/ncu-glm64-$b.txt | sed -E 's/ +/ /g' | cut -c1-120 | head -12
  done
fi
