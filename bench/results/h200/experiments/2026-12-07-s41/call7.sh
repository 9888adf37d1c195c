#!/usr/bin/env bash
# s41 call 7. Binaries carried as .device/pack.tar.xz (built in s40): .device/e = efbcaed, .device/f = efbcaed +
# prologue.patch = main's kernels since da1a516. On an H200: f's whole test_cuda, f's acceptance run
# (scripts/gpu_bench.sh), ncu pipe counters of gate_up and down at glm-4.5-air T = 64 and T = 4 (the 2-tile tactic of s40's H100 counters), then one A/B round e / f.
# On any other card: f's whole test_cuda only (the H100 rows were measured in calls 1-2). Everything under $OUT/r, one
# tarball at the end (the device tool returns few files), and the summary printed.
set -u
export LD_LIBRARY_PATH=$PWD/.device/lib
name=$(nvidia-smi --query-gpu=name --format=csv,noheader | head -1); echo "$name"
case $name in *H200*) card=h200 ;; *H100*) card=h100 ;; *) card=other ;; esac
o=$OUT/r/$card; mkdir -p $o
pack() { (cd $OUT && tar czf 0-s41-call7.tgz r); }
timeout 200 .device/f/test_cuda > $o/gpu_test-f.log 2>&1; echo "test_cuda f rc=$?"
grep -E "^\[  (PASSED|FAILED)|FAILED" $o/gpu_test-f.log | head -8; pack
if [ $card = h200 ]; then
  FP4MOE=$PWD/.device/f/fp4moe timeout 260 bash scripts/gpu_bench.sh $o/accept 1,4,16,64 > $o/accept-run.log 2>&1
  echo "gpu_bench rc=$?"; python3 bench/results/h200/experiments/2026-12-05-s30/table.py $o/accept; tail -1 $o/accept/acceptance.md
  pack
  N=/usr/local/cuda/bin/ncu
  for T in 64 4; do
    timeout 60 $N --clock-control none --section SpeedOfLight --section WarpStateStats --metrics smsp__inst_executed.sum,sm__inst_executed_pipe_alu.avg.pct_of_peak_sustained_active,sm__pipe_fma_cycles_active.avg.pct_of_peak_sustained_active,sm__pipe_fmaheavy_cycles_active.avg.pct_of_peak_sustained_active,sm__pipe_tensor_cycles_active.avg.pct_of_peak_sustained_active,sm__pipe_shared_cycles_active.avg.pct_of_peak_sustained_active \
      -k "regex:moe_gemm" -c 2 .device/f/fp4moe bench moe --device cuda --shape glm-4.5-air --tokens $T --runners cuda.decode \
      --tactics 'nt=1 ksplit=1 bulk 2x4 ksteps, 2 tiles per warp, combine kernel' --no-auto --iters 3 --warmup 1 > $o/ncu-glm$T-f.txt 2>&1
    echo "ncu T=$T rc=$?"; grep -E "moe_gemm|Duration|pipe|Issue Slots|Ipc A|DRAM Th|inst_executed.sum" $o/ncu-glm$T-f.txt | sed -E 's/ +/ /g' | cut -c1-110 | head -24
    pack
  done
  for s in glm-4.5-air deepseek-v3 qwen3-30b-a3b; do for b in f e; do
    timeout 60 .device/$b/fp4moe bench moe --device cuda --shape $s --tokens 1,4,16,64 --runners cuda.decode \
      --json $o/ab-$b-$s-1.json > $o/ab-$b-$s-1.txt 2>&1 || echo "bench $b $s failed"
  done; done
  python3 bench/results/h200/experiments/2026-12-07-s40/ab.py $o e f; pack
fi
rm -rf $OUT/r
