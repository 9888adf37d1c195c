#!/usr/bin/env bash
# Session 22 call 3: what holds an expert's narrow last block. The tail-launch build (narrow tails of <= 64 rows in
# a launch of their own): its tactics beside main's at deepseek-v3 T = 4096 (two rounds), and ncu sections of the
# tail launch alone, two warpgroups at depth 1 against four at depth 0.
set -u
export LD_LIBRARY_PATH=$PWD/.device/lib
D=$OUT/r; mkdir -p $D
for r in 1 2; do
  timeout 60 .device/t/fp4moe bench moe --device cuda --shape deepseek-v3 --tokens 4096 --runners cuda.grouped \
    --tactics 'stages=6 rows=192 wg=3, down bn=128 stages=4' --no-auto > $D/pre-r$r.txt 2>&1
  echo "== r$r rc=$?"; grep -E "^(cuda|measured)" $D/pre-r$r.txt | sed -E 's/  +/ /g; s/cuda.grouped gate_up //; s/down bn=128 //' | cut -c1-150
done
S="--section SpeedOfLight --section WarpStateStats --section SchedulerStats --section LaunchStats --section Occupancy --section MemoryWorkloadAnalysis"
for f in 'tails <= 64 rows bn=64 stages=6,' 'bn=64 stages=6 rows=256 wg=4'; do
  n=$(echo "$f" | tr -cd 'a-z0-9')
  timeout 100 ncu -k 'regex:grouped_gemm' -c 1 $S --metrics 'regex:smsp__average_warps_issue_stalled_.*_per_issue_active\.ratio' \
    .device/t/fp4moe bench moe --device cuda --shape deepseek-v3 --tokens 4096 --runners cuda.grouped --tactics "$f" \
    --no-auto > $D/ncu-$n.txt 2>&1
  rc=$?
  if [ $rc != 0 ]; then timeout 100 ncu -k 'regex:grouped_gemm' -c 1 $S .device/t/fp4moe bench moe --device cuda \
    --shape deepseek-v3 --tokens 4096 --runners cuda.grouped --tactics "$f" --no-auto > $D/ncu2-$n.txt 2>&1; fi
  echo "ncu '$f' rc=$rc"; grep -h -E "grouped_gemm_kernel<|Duration|stalled|Issue Slots Busy|Eligible Warps|DRAM Throughput|Compute \(SM\) Throughput|L2 Hit|Registers Per|Warp Cycles Per Issued" $D/ncu*-$n.txt | sed -E 's/\(CUtensorMap.*//; s/  +/ /g; s/smsp__average_warps_issue_stalled_//' | awk '$NF+0 > 0.05 || !/ratio/' | head -45
done
cd $OUT && tar czf r.tgz r
