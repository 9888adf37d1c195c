#!/usr/bin/env bash
# GPU call 3 (s16): the shared experts beside routing with fewer SMs (FP4MOE_SHARED_CTAS 22 / 33 / 44 against 0),
# twice, deepseek-v3; then an nsys timeline of one forward (if nsys is there).
set -uo pipefail
mkdir -p $OUT/s
N=.device/n
for round in 1 2; do
  for c in 0 22 33 44; do
    export FP4MOE_SHARED_CTAS=$c
    timeout 60 $N/fp4moe bench moe --device cuda --shape deepseek-v3 --tokens 1024,4096,16384 --runners cuda.grouped \
      --tactics 'wg=' --no-auto > $OUT/s/deepseek-v3-$c-$round.txt 2>&1
    echo "== dsv3 ctas=$c round $round rc=$? $(date +%T) $(grep 'measured floor' $OUT/s/deepseek-v3-$c-$round.txt | grep -oE 'peak [0-9.]+')"
    grep -E "^cuda" $OUT/s/deepseek-v3-$c-$round.txt | sed -E 's/  +/ /g' | sed -E 's/cuda.grouped //; s/, down bn=128 stages=4 rows=256//' | cut -c1-75
  done
done
which nsys ncu
if command -v nsys > /dev/null; then
  export FP4MOE_SHARED_CTAS=88
  timeout 150 nsys profile -t cuda --cuda-graph-trace=node -o $OUT/s/tl88 $N/fp4moe bench moe --device cuda --shape deepseek-v3 --tokens 4096 \
     --runners cuda.grouped --tactics 'wg=3' --no-auto > $OUT/s/nsys88.log 2>&1; echo "nsys rc=$?"
  timeout 60 nsys stats -r cuda_gpu_trace -f csv -o $OUT/s/tl88 $OUT/s/tl88.nsys-rep > /dev/null 2>&1; echo "stats rc=$?"
  ls $OUT/s | tail -5
  rm -f $OUT/s/*.nsys-rep $OUT/s/*.sqlite
fi
unset FP4MOE_SHARED_CTAS
cd $OUT/s && tar czf ../s.tgz . && cd .. && rm -rf s
