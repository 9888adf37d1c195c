#!/usr/bin/env bash
# s42 call 9: binaries carried as .device/pack9.tar.xz (f = main's kernels, da1a516; s = f + ../2026-12-07-s41/
# scale-imad.patch; lib). On an H200 only (any other card exits at once: call 8 measured the H100): f's acceptance
# run (scripts/gpu_bench.sh), one interleaved A/B round f / s, ncu pipe counters of f and s (gate_up + down,
# glm-4.5-air T = 64, the 2-tile tactic), a second A/B round if time is left. One tarball under $OUT.
set -u
export LD_LIBRARY_PATH=$PWD/.device/lib
name=$(nvidia-smi --query-gpu=name --format=csv,noheader | head -1); echo "$name"
case $name in *H200*) ;; *) echo "not an H200: nothing to measure here"; exit 0 ;; esac
o=$OUT/r/h200; mkdir -p $o; t0=$SECONDS
pack() { (cd $OUT && tar czf 0-s42-call9.tgz r); }
FP4MOE=$PWD/.device/f/fp4moe timeout 240 bash scripts/gpu_bench.sh $o/accept 1,4,16,64 > $o/accept-run.log 2>&1
echo "gpu_bench rc=$?"; python3 bench/results/h200/experiments/2026-12-05-s30/table.py $o/accept; tail -1 $o/accept/acceptance.md
pack
ab() { # round
  for s in glm-4.5-air deepseek-v3 qwen3-30b-a3b; do for b in f s; do
    timeout 60 .device/$b/fp4moe bench moe --device cuda --shape $s --tokens 1,4,16,64 --runners cuda.decode \
      --json $o/ab-$b-$s-$1.json > $o/ab-$b-$s-$1.txt 2>&1 || echo "bench $b $s $1 failed"
  done; done
  python3 bench/results/h200/experiments/2026-12-07-s40/ab.py $o f s; pack
}
ab 1
for b in f s; do
  timeout 50 /usr/local/cuda/bin/ncu --clock-control none --section SpeedOfLight --section WarpStateStats --metrics smsp__inst_executed.sum,sm__inst_executed_pipe_alu.avg.pct_of_peak_sustained_active,sm__pipe_fma_cycles_active.avg.pct_of_peak_sustained_active,sm__pipe_fmaheavy_cycles_active.avg.pct_of_peak_sustained_active,sm__pipe_tensor_cycles_active.avg.pct_of_peak_sustained_active,sm__pipe_shared_cycles_active.avg.pct_of_peak_sustained_active \
    -k "regex:moe_gemm" -c 2 .device/$b/fp4moe bench moe --device cuda --shape glm-4.5-air --tokens 64 --runners cuda.decode \
    --tactics 'nt=1 ksplit=1 bulk 2x4 ksteps, 2 tiles per warp, combine kernel' --no-auto --iters 3 --warmup 1 > $o/ncu-glm64-$b.txt 2>&1
  echo "ncu $b rc=$?"; grep -E "moe_gemm|Duration|pipe|Issue Slots|DRAM Th|inst_executed.sum|Throttle" $o/ncu-glm64-$b.txt | sed -E 's/ +/ /g' | cut -c1-110 | head -20
  pack
done
[ $((SECONDS - t0)) -lt 380 ] && ab 2
rm -rf $OUT/r
