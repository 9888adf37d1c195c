#!/usr/bin/env bash
# s24 call 8: where the one-CTA top-k + plan kernel spends its 7-9 us at T = 1 (qwen3-30b-a3b softmax, glm-4.5-air
# sigmoid + bias): ncu warp-state sampling per SASS instruction (source page), one launch each.
set -u
export LD_LIBRARY_PATH=$PWD/.device/lib
o=$OUT/n; mkdir -p $o
N=/usr/local/cuda/bin/ncu
for s in qwen3-30b-a3b glm-4.5-air; do
  FP4MOE_STAGES=0 timeout 150 $N --clock-control none --section WarpStateStats --section SourceCounters --section SpeedOfLight \
    -k regex:topk_plan -s 20 -c 1 --page source --print-source sass --csv \
    .device/s/fp4moe bench moe --device cuda --shape $s --tokens 1 --runners cuda.decode --no-auto --tactics 'nt=1 ksplit=1 bulk 2x4 ksteps, combine kernel' --iters 3 --warmup 1 > $o/$s-src.csv 2> $o/$s-src.err
  echo "$s rc=$? $(wc -l < $o/$s-src.csv)"
  FP4MOE_STAGES=0 timeout 150 $N --clock-control none --section WarpStateStats --section SpeedOfLight --section LaunchStats \
    -k regex:topk_plan -s 20 -c 1 .device/s/fp4moe bench moe --device cuda --shape $s --tokens 1 --runners cuda.decode --no-auto --tactics 'nt=1 ksplit=1 bulk 2x4 ksteps, combine kernel' --iters 3 --warmup 1 > $o/$s-sum.txt 2>&1
  echo "$s sum rc=$?"; grep -E "Duration|Stall|Warp Cycles|Issued" $o/$s-sum.txt | sed -E 's/ +/ /g' | head -12
done
head -c 3000 $o/qwen3-30b-a3b-src.csv
cd $OUT && tar czf n.tgz n && rm -rf n
