#!/usr/bin/env bash
# s25 call 2: why call 1's one-launch routing was no faster. Experiment builds with FP4MOE_ROUTING_ONLY (the layer
# stops after routing; patch routing-only.patch): .device/o = 83972f8 (two routing kernels), .device/n = this
# tree with -lineinfo (one launch). (1) routing alone in the layer's graph, old vs new, three interleaved rounds;
# (2) ncu kernel durations (each kernel alone) for glm-4.5-air and deepseek-v3 at T = 1; (3) ncu per-line warp
# samples of the one-launch kernel at glm-4.5-air and deepseek-v3 T = 1.
set -u
export LD_LIBRARY_PATH=$PWD/.device/lib
E=bench/results/h200/experiments/2026-12-03-s25
o=$OUT/r; mkdir -p $o
T1='nt=1 ksplit=2 bulk 2x4 ksteps, down ksplit=1'
for round in 1 2 3; do for s in glm-4.5-air deepseek-v3 qwen3-30b-a3b; do for b in o n; do
  j=$o/ro-$s-$b-r$round.json
  FP4MOE_ROUTING_ONLY=1 timeout 60 .device/$b/fp4moe bench moe --device cuda --shape $s --tokens 1,2,4,8 \
    --runners cuda.decode --no-auto --tactics "$T1" --json $j > /dev/null 2> ${j%.json}.err
  echo "routing $s $b r$round $(python3 $E/best.py $j 2>&1 | tail -1)"
done; done; done
N=/usr/local/cuda/bin/ncu
for s in glm-4.5-air deepseek-v3; do for b in o n; do
  FP4MOE_ROUTING_ONLY=1 timeout 120 $N --clock-control none -k 'regex:splitk|topk_plan|route_decode' -s 6 -c 6 \
    --metrics gpu__time_duration.sum,sm__cycles_active.max,launch__registers_per_thread --csv \
    .device/$b/fp4moe bench moe --device cuda --shape $s --tokens 1 --runners cuda.decode --no-auto --tactics "$T1" \
    --iters 3 --warmup 1 > $o/ncu-$s-$b.csv 2> $o/ncu-$s-$b.err
  echo "ncu $s $b rc=$?"; grep -E "gpu__time_duration|registers" $o/ncu-$s-$b.csv | awk -F'","' '{print $5, $(NF-2), $NF}' | cut -c1-160 | head -12
done; done
for s in glm-4.5-air deepseek-v3; do
  FP4MOE_ROUTING_ONLY=1 timeout 150 $N --clock-control none --sampling-interval 0 --section WarpStateStats \
    --section SourceCounters -k regex:route_decode -s 2 -c 1 --page source --print-source sass,cuda --csv \
    .device/n/fp4moe bench moe --device cuda --shape $s --tokens 1 --runners cuda.decode --no-auto --tactics "$T1" \
    --iters 3 --warmup 1 > $o/src-$s.csv 2> $o/src-$s.err
  echo "src $s rc=$? $(wc -l < $o/src-$s.csv)"
done
cd $OUT && tar czf r.tgz r && rm -rf r
