#!/usr/bin/env bash
# s24 call 12 (written for the next session, not run: device time spent): where the one-CTA top-k + plan kernel of
# T <= 8 spends its 11-14 K cycles (call 8's sampling was too coarse: 6-7 samples). Build main with
# `-lineinfo` added to CMAKE_CUDA_FLAGS into .device/m (fp4moe only), carry .device. Warp-state samples every
# 2^5 cycles, per SASS line with its source line, for qwen3-30b-a3b (softmax) and glm-4.5-air (sigmoid + bias).
set -u
export LD_LIBRARY_PATH=$PWD/.device/lib
o=$OUT/n; mkdir -p $o
N=/usr/local/cuda/bin/ncu
for s in qwen3-30b-a3b glm-4.5-air; do
  timeout 150 $N --clock-control none --sampling-interval 0 --section WarpStateStats --section SourceCounters \
    -k regex:topk_plan -s 20 -c 1 --page source --print-source sass,cuda --csv \
    .device/m/fp4moe bench moe --device cuda --shape $s --tokens 1 --runners cuda.decode --no-auto \
    --tactics 'nt=1 ksplit=1 bulk 2x4 ksteps, combine kernel' --iters 3 --warmup 1 > $o/$s-src.csv 2> $o/$s-src.err
  echo "$s rc=$? $(wc -l < $o/$s-src.csv)"
done
cd $OUT && tar czf n.tgz n && rm -rf n
