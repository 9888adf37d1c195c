#!/usr/bin/env bash
# s17 call 3: ncu of main's kernels: decode T = 1 (each shape's auto tactic), gate_up/down at deepseek-v3 T = 4096.
set -u
d=$(cd "$(dirname "$0")" && pwd)
o=$OUT/n; mkdir -p $o
N=/usr/local/cuda/bin/ncu
S="--section SpeedOfLight --section LaunchStats --section Occupancy --section ComputeWorkloadAnalysis --section WarpStateStats --section MemoryWorkloadAnalysis"
run1() { # shape tactic tokens kernels count name
  timeout 170 $N --clock-control none $S -k "regex:$4" -c $5 $d/t/fp4moe bench moe --device cuda --shape $1 --tokens $3 \
    --runners $6 --tactics "$2" --no-auto > $o/$7.txt 2>&1
  echo "== $7 rc=$?"; grep -E "^  [a-z_]+.*\(|Duration|DRAM Throughput|Registers Per|Achieved Occupancy|Waves Per SM|Grid Size" $o/$7.txt | head -60
}
run1 glm-4.5-air 'nt=1 ksplit=2 bulk 2x4 ksteps, down ksplit=1' 1 'moe_|route|router' 5 cuda.decode glm-t1
run1 qwen3-30b-a3b 'nt=1 ksplit=4 bulk 2x4 ksteps, down ksplit=2' 1 'moe_|route|router' 5 cuda.decode qwen3-t1
run1 deepseek-v3 'nt=1 ksplit=2 bulk 2x4 ksteps, down ksplit=1' 1 'moe_|route|router' 5 cuda.decode dsv3-t1
run1 deepseek-v3 'gate_up bn=192 stages=6 rows=192 wg=3, down bn=128 stages=4 rows=256' 4096 'grouped_gemm|gather|combine|route|router|plan|rows_|pairs_' 12 cuda.grouped dsv3-t4096
cd $OUT && tar czf n.tgz n
