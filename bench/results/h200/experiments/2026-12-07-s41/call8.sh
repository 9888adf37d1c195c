#!/usr/bin/env bash
# s41 call 8 (for a later session; binaries carried as .device/pack.tar.xz: f s w sw lib). f = main's kernels
# (da1a516); s = f + scale-imad.patch (scale codes loaded a byte each, one IMAD per code: 32 ALU-pipe ops per 2-tile
# chunk moved to the FMA pipe, 562 -> 555 per chunk); w = f + ../2026-12-07-s39/wide.patch (the two rotations per word
# as IMAD.WIDE: 64 SHF per chunk off the ALU pipe; 1-5 % slower on the H100 in s39); sw = both.
# (1) decode tests of s, w, sw; (2) A/B of the four, cuda.decode every tactic + auto, T = 1/4/16/64, three shapes,
# interleaved rounds; (3) on an H200: f's acceptance run (scripts/gpu_bench.sh) and ncu pipe counters of f and s
# (gate_up + down, glm-4.5-air T = 64, the 2-tile tactic); (4) a second A/B round if the call has time left.
# Everything under $OUT/r, one tarball (the device tool returns few files), the summary printed.
set -u
export LD_LIBRARY_PATH=$PWD/.device/lib
name=$(nvidia-smi --query-gpu=name --format=csv,noheader | head -1); echo "$name"
case $name in *H200*) card=h200 ;; *H100*) card=h100 ;; *) card=other ;; esac
o=$OUT/r/$card; mkdir -p $o; t0=$SECONDS
pack() { (cd $OUT && tar czf 0-s41-call8.tgz r); }
for b in s w sw; do
  timeout 120 .device/$b/test_cuda --gtest_filter='*Decode*:*MmaPack*' > $o/gpu_test-$b.log 2>&1; echo "test_cuda $b rc=$?"
  grep -E "^\[  (PASSED|FAILED)|FAILED" $o/gpu_test-$b.log | head -4
done
ab() { # round
  for s in glm-4.5-air deepseek-v3 qwen3-30b-a3b; do for b in f s w sw; do
    timeout 60 .device/$b/fp4moe bench moe --device cuda --shape $s --tokens 1,4,16,64 --runners cuda.decode \
      --json $o/ab-$b-$s-$1.json > $o/ab-$b-$s-$1.txt 2>&1 || echo "bench $b $s $1 failed"
  done; done
  for b in s w sw; do python3 bench/results/h200/experiments/2026-12-07-s40/ab.py $o f $b; done; pack
}
ab 1
if [ $card = h200 ]; then
  FP4MOE=$PWD/.device/f/fp4moe timeout 200 bash scripts/gpu_bench.sh $o/accept 1,4,16,64 > $o/accept-run.log 2>&1
  echo "gpu_bench rc=$?"; python3 bench/results/h200/experiments/2026-12-05-s30/table.py $o/accept; tail -1 $o/accept/acceptance.md
  pack
  for b in f s; do
    timeout 60 /usr/local/cuda/bin/ncu --clock-control none --section SpeedOfLight --section WarpStateStats --metrics smsp__inst_executed.sum,sm__inst_executed_pipe_alu.avg.pct_of_peak_sustained_active,sm__pipe_fma_cycles_active.avg.pct_of_peak_sustained_active,sm__pipe_fmaheavy_cycles_active.avg.pct_of_peak_sustained_active,sm__pipe_tensor_cycles_active.avg.pct_of_peak_sustained_active,sm__pipe_shared_cycles_active.avg.pct_of_peak_sustained_active \
      -k "regex:moe_gemm" -c 2 .device/$b/fp4moe bench moe --device cuda --shape glm-4.5-air --tokens 64 --runners cuda.decode \
      --tactics 'nt=1 ksplit=1 bulk 2x4 ksteps, 2 tiles per warp, combine kernel' --no-auto --iters 3 --warmup 1 > $o/ncu-glm64-$b.txt 2>&1
    echo "ncu $b rc=$?"; grep -E "moe_gemm|Duration|pipe|Issue Slots|DRAM Th|inst_executed.sum|Throttle" $o/ncu-glm64-$b.txt | sed -E 's/ +/ /g' | cut -c1-110 | head -20
    pack
  done
fi
[ $((SECONDS - t0)) -lt 330 ] && ab 2
rm -rf $OUT/r
