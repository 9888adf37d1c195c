#!/usr/bin/env bash
# s40 call 2, H200 only (another card exits at once). Binaries carried as .device/pack.tar.xz:
#   .device/n = main's code at 786d02b (the register-3 multiply layout; docs-only commits since),
#   .device/u = n + uniform.patch: the warp index broadcast from lane 0 (warp-uniform to ptxas) and the chunk's bulk
#   copies issued under elect.sync instead of `lane == 0` (ptxas had wrapped each copy in a loop over the active
#   lanes), full chunks with constant byte counts. SASS of one full chunk, lane-0 issue included: gate_up 2-tile
#   595 -> 562 instructions, down 2-tile 617 -> 567, gate_up 1-tile 340 -> 326.
# (1) main's issue-4 acceptance run (scripts/gpu_bench.sh) and test_cuda, (2) the A/B n / u (cuda.decode, every
# tactic + auto, T = 1/4/16/64, three shapes, interleaved), (3) u's decode tests.
# Files stay under $OUT/r (no tarball at the end), so a run cut short still returns what it wrote.
set -u
export LD_LIBRARY_PATH=$PWD/.device/lib
name=$(nvidia-smi --query-gpu=name --format=csv,noheader | head -1); echo "$name"
case $name in *H200*) ;; *) echo "not an H200: nothing run"; exit 0 ;; esac
o=$OUT/r/h200; mkdir -p $o
FP4MOE=$PWD/.device/n/fp4moe timeout 260 bash scripts/gpu_bench.sh $o/accept 1,4,16,64 > $o/accept-run.log 2>&1; echo "gpu_bench rc=$?"
python3 bench/results/h200/experiments/2026-12-05-s30/table.py $o/accept
tail -3 $o/accept/acceptance.md
timeout 150 .device/n/test_cuda > $o/gpu_test.log 2>&1; echo "test_cuda rc=$?"
grep -E "^\[  (PASSED|FAILED)|FAILED" $o/gpu_test.log | head -8
ab() { # binary round
  for s in glm-4.5-air deepseek-v3 qwen3-30b-a3b; do
    timeout 60 .device/$1/fp4moe bench moe --device cuda --shape $s --tokens 1,4,16,64 --runners cuda.decode \
      --json $o/ab-$1-$s-$2.json > $o/ab-$1-$s-$2.txt 2>&1 || echo "bench $1 $s $2 failed"
  done
}
ab u 1; ab n 1
python3 bench/results/h200/experiments/2026-12-07-s40/ab.py $o n u
timeout 60 .device/u/test_cuda --gtest_filter='*Decode*' > $o/gpu_test-u.log 2>&1; echo "test_cuda u rc=$?"
grep -E "^\[  (PASSED|FAILED)|FAILED" $o/gpu_test-u.log | head -8
