#!/usr/bin/env bash
# s23 call 1: ncu of main's decode kernels (each kernel alone, cold L2) where the decode rows miss the bar:
# glm-4.5-air T = 4 / 16 / 64, qwen3-30b-a3b T = 4, and deepseek-v3 T = 16 (at the bar) for comparison.
set -u
export LD_LIBRARY_PATH=$PWD/.device/lib
B=$PWD/.device/t/fp4moe
o=$OUT/n; mkdir -p $o
N=/usr/local/cuda/bin/ncu
S="--section SpeedOfLight --section LaunchStats --section Occupancy --section SchedulerStats --section WarpStateStats"
M="--metrics sm__cycles_active.avg,sm__cycles_active.max,sm__cycles_elapsed.max,smsp__warps_active.avg.per_cycle_active,smsp__inst_executed.sum,dram__bytes_read.sum"
run1() { # shape tactic tokens name
  timeout 100 $N --clock-control none $S $M -k "regex:moe_|route|router" -c 4 $B bench moe --device cuda --shape $1 --tokens $3 \
    --runners cuda.decode --tactics "$2" --no-auto > $o/$4.txt 2>&1
  echo "== $4 rc=$?"
  grep -E "^  [a-z_ ]+.*\(|Duration|DRAM Throughput|Registers Per|Achieved Occupancy|Waves Per SM|Grid Size|Issue Slots Busy|No Eligible|Eligible Warps|sm__cycles_active|smsp__warps_active|inst_executed|dram__bytes" $o/$4.txt | sed -E 's/ +/ /g' | cut -c1-150
}
run1 glm-4.5-air 'nt=1 ksplit=2 bulk 2x4 ksteps, down ksplit=1, 2 tiles per warp' 4 glm-t4
run1 glm-4.5-air 'nt=1 ksplit=1 bulk 2x4 ksteps, 2 tiles per warp' 16 glm-t16
run1 glm-4.5-air 'nt=1 ksplit=1 bulk 2x4 ksteps, 2 tiles per warp' 64 glm-t64
run1 qwen3-30b-a3b 'nt=1 ksplit=1 bulk 2x4 ksteps' 4 qwen3-t4
run1 deepseek-v3 'nt=1 ksplit=1 bulk 2x8 ksteps' 16 dsv3-t16
cd $OUT && tar czf n.tgz n && rm -rf n
