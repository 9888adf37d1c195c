#!/usr/bin/env bash
# s24 call 6: the routing kernels alone under ncu (routing is 9-14 us of the layer at T <= 4 and 20-39 us at T = 64 in
# call 5's stage ablation): durations, grid, occupancy, DRAM throughput at deepseek-v3 / glm-4.5-air T = 64 and
# glm-4.5-air / qwen3-30b-a3b T = 1.
set -u
export LD_LIBRARY_PATH=$PWD/.device/lib
o=$OUT/n; mkdir -p $o
N=/usr/local/cuda/bin/ncu
S="--section SpeedOfLight --section LaunchStats --section Occupancy"
M="--metrics sm__cycles_active.avg,sm__cycles_active.max,smsp__inst_executed.sum,dram__bytes_read.sum,gpu__time_duration.sum"
run1() { # shape tokens name
  FP4MOE_STAGES=0 timeout 120 $N --clock-control none $S $M -k "regex:route|router|plan" -c 6 .device/s/fp4moe bench moe --device cuda --shape $1 --tokens $2 \
    --runners cuda.decode --tactics 'nt=1 ksplit=1 bulk 2x4 ksteps, 2 tiles per warp, combine kernel' --no-auto --iters 3 --warmup 1 > $o/$3.txt 2>&1
  echo "== $3 rc=$?"
  grep -E "^  [a-zA-Z_].*\(|gpu__time_duration|Duration|DRAM Throughput|Grid Size|Block Size|Registers Per|Achieved Occupancy|sm__cycles_active|inst_executed" $o/$3.txt | sed -E 's/ +/ /g' | cut -c1-160
}
run1 deepseek-v3 64 dsv3-t64
run1 glm-4.5-air 64 glm-t64
run1 glm-4.5-air 1 glm-t1
run1 qwen3-30b-a3b 1 qwen3-t1
cd $OUT && tar czf n.tgz n && rm -rf n
