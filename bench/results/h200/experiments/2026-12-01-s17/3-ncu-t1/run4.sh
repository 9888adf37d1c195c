#!/usr/bin/env bash
# s17 call 4: ncu source counters of the top-k + plan kernel at T = 1 (glm-4.5-air, deepseek-v3).
set -u
d=$(cd "$(dirname "$0")" && pwd)
o=$OUT/s; mkdir -p $o
N=/usr/local/cuda/bin/ncu
for s in glm-4.5-air deepseek-v3; do
  timeout 120 $N --clock-control none --section SourceCounters --section WarpStateStats --warp-sampling-interval 0 -k "regex:topk_plan" -c 1 -o $o/$s \
    $d/t/fp4moe bench moe --device cuda --shape $s --tokens 1 --runners cuda.decode --tactics 'nt=1 ksplit=2 bulk 2x4 ksteps, down ksplit=1' --no-auto > $o/$s.log 2>&1
  echo "== $s rc=$?"
  $N --import $o/$s.ncu-rep --page source --csv --print-source sass > $o/$s-src.csv 2>&1
  python3 $d/../bench/ncu_stalls.py $o/$s-src.csv 2>&1 | head -60
done
gzip $o/*.csv
cd $OUT && tar czf s.tgz s
