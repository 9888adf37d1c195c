#!/usr/bin/env bash
# s23 call 5: the landed build's decode rows read again (auto, two rounds, three shapes), and ncu of gate_up, down
# and the combine kernel at glm-4.5-air T = 64 (the combine-kernel tactic) against the fused tactic's down.
set -u
export LD_LIBRARY_PATH=$PWD/.device/lib
B=$PWD/.device/t/fp4moe
o=$OUT/r; mkdir -p $o
for round in 1 2; do for s in glm-4.5-air deepseek-v3 qwen3-30b-a3b; do
  timeout 80 $B bench moe --device cuda --shape $s --tokens 1,4,16,64 --runners cuda.decode --tactics default \
    --json $o/a-$s-r$round.json > $o/a-$s-r$round.txt 2>&1; echo "== auto $s r$round rc=$?"
  grep -E "^auto" $o/a-$s-r$round.txt | sed -E 's/ +/ /g' | cut -c1-160
done; done
N=/usr/local/cuda/bin/ncu
for tac in 'nt=1 ksplit=1 bulk 2x4 ksteps, 2 tiles per warp, combine kernel' 'nt=1 ksplit=1 bulk 2x4 ksteps, 2 tiles per warp'; do
  n=$(echo "$tac" | tr -c 'a-z0-9' '_' | cut -c1-60)
  timeout 100 $N --clock-control none --section SpeedOfLight --metrics smsp__inst_executed.sum,sm__cycles_active.avg \
    -k "regex:moe_gemm|moe_combine" -c 3 $B bench moe --device cuda --shape glm-4.5-air --tokens 64 --runners cuda.decode \
    --tactics "$tac" --no-auto > $o/ncu-$n.txt 2>&1; echo "ncu rc=$?"
  grep -E "moe_gemm_kernel|moe_combine|Duration|DRAM Throughput|inst_executed" $o/ncu-$n.txt | sed -E 's/ +/ /g' | cut -c1-120
done
cd $OUT && tar czf r.tgz r && rm -rf r
