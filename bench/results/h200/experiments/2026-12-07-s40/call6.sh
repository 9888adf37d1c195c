#!/usr/bin/env bash
# s40 call 6, any card. Binaries carried as .device/pack.tar.xz: .device/e = main at efbcaed (elect.sync copy issue),
# .device/f = e + prologue.patch: find_group's tiles-to-groups divisions by compile-time NT / NTS (no runtime integer
# division per scanned expert), and down's last-but-one chunk check-free where K is whole 64-steps (its unused B
# prefetches read past the K part; LongIntermediate now also runs 1408).
# (1) f's decode tests; (2) the A/B e / f (cuda.decode, every tactic + auto, T = 1/4/16/64, three shapes; H200 one
# round, else two, interleaved); (3) H200: f's acceptance run (scripts/gpu_bench.sh) and ncu pipe counters of gate_up at
# glm-4.5-air T = 64. Everything under $OUT/r, one tarball at the end (the device tool returns few files), and the
# summary printed.
set -u
export LD_LIBRARY_PATH=$PWD/.device/lib
name=$(nvidia-smi --query-gpu=name --format=csv,noheader | head -1); echo "$name"
case $name in *H200*) card=h200 ;; *H100*) card=h100 ;; *) card=other ;; esac
o=$OUT/r/$card; mkdir -p $o
pack() { (cd $OUT && tar czf 0-s40-call6.tgz r); } # 0-: listed before r/ if the call is cut before the end
timeout 120 .device/f/test_cuda --gtest_filter='*Decode*' > $o/gpu_test-f.log 2>&1; echo "test_cuda f rc=$?"
grep -E "^\[  (PASSED|FAILED)|FAILED" $o/gpu_test-f.log | head -8
ab() { # binary round
  for s in glm-4.5-air deepseek-v3 qwen3-30b-a3b; do
    timeout 60 .device/$1/fp4moe bench moe --device cuda --shape $s --tokens 1,4,16,64 --runners cuda.decode \
      --json $o/ab-$1-$s-$2.json > $o/ab-$1-$s-$2.txt 2>&1 || echo "bench $1 $s $2 failed"
  done
}
ab f 1; ab e 1; python3 bench/results/h200/experiments/2026-12-07-s40/ab.py $o e f; pack
if [ $card != h200 ] && [ "${ROUNDS:-2}" -gt 1 ]; then
  ab e 2; ab f 2; python3 bench/results/h200/experiments/2026-12-07-s40/ab.py $o e f; pack
fi
if [ $card = h200 ]; then
  FP4MOE=$PWD/.device/f/fp4moe timeout 260 bash scripts/gpu_bench.sh $o/accept 1,4,16,64 > $o/accept-run.log 2>&1
  echo "gpu_bench rc=$?"; python3 bench/results/h200/experiments/2026-12-05-s30/table.py $o/accept; tail -3 $o/accept/acceptance.md
  pack
  N=/usr/local/cuda/bin/ncu
  timeout 80 $N --clock-control none --section SpeedOfLight --section WarpStateStats --metrics smsp__inst_executed.sum,sm__inst_executed_pipe_alu.avg.pct_of_peak_sustained_active,sm__pipe_fma_cycles_active.avg.pct_of_peak_sustained_active,sm__pipe_fmaheavy_cycles_active.avg.pct_of_peak_sustained_active,sm__pipe_tensor_cycles_active.avg.pct_of_peak_sustained_active \
    -k "regex:moe_gemm" -c 2 .device/f/fp4moe bench moe --device cuda --shape glm-4.5-air --tokens 64 --runners cuda.decode \
    --tactics 'nt=1 ksplit=1 bulk 2x4 ksteps, 2 tiles per warp, combine kernel' --no-auto --iters 3 --warmup 1 > $o/ncu-glm64-f.txt 2>&1
  echo "ncu rc=$?"; grep -E "Duration|pipe|Issue Slots|Ipc A|DRAM Th|Stall" $o/ncu-glm64-f.txt | sed -E 's/ +/ /g' | cut -c1-110 | head -30
  pack
fi
rm -rf $OUT/r
