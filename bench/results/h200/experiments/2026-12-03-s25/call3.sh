#!/usr/bin/env bash
# s25 call 3: where the routing CTA's time goes. .device/n = this tree + routing-only.patch + marks.patch (clock64
# marks in route_plan_body, printed by thread 0 for the first 24 calls; FP4MOE_TWO_KERNELS=1 takes the two-kernel
# path of the same build). Routing alone in the layer's graph at T = 1 and 4, both paths, three shapes.
set -u
export LD_LIBRARY_PATH=$PWD/.device/lib
o=$OUT/r; mkdir -p $o
T1='nt=1 ksplit=2 bulk 2x4 ksteps, down ksplit=1'
for s in glm-4.5-air deepseek-v3 qwen3-30b-a3b; do for tk in 0 1; do for T in 1 4; do
  if [ $tk = 1 ]; then export FP4MOE_TWO_KERNELS=1; else unset FP4MOE_TWO_KERNELS; fi
  FP4MOE_ROUTING_ONLY=1 timeout 60 .device/n/fp4moe bench moe --device cuda --shape $s --tokens $T --runners cuda.decode \
    --no-auto --tactics "$T1" --iters 20 --warmup 3 > $o/m-$s-$tk-$T.txt 2>&1
  echo "== $s two_kernels=$tk T=$T"; grep RPMARK $o/m-$s-$tk-$T.txt | tail -4
done; done; done
unset FP4MOE_TWO_KERNELS
N=/usr/local/cuda/bin/ncu
for tk in 0 1; do
  if [ $tk = 1 ]; then export FP4MOE_TWO_KERNELS=1; k=topk_plan; else unset FP4MOE_TWO_KERNELS; k=route_decode; fi
  FP4MOE_ROUTING_ONLY=1 timeout 120 $N --clock-control none --section WarpStateStats --section InstructionStats \
    --section SchedulerStats -k regex:$k -s 2 -c 1 .device/n/fp4moe bench moe --device cuda --shape deepseek-v3 \
    --tokens 1 --runners cuda.decode --no-auto --tactics "$T1" --iters 3 --warmup 1 > $o/ncu-stall-$k.txt 2>&1
  echo "ncu $k rc=$?"; grep -iE "Duration|Stall|No Instruction|Executed Instructions|Warp Cycles Per Issued" $o/ncu-stall-$k.txt | head -20
  FP4MOE_ROUTING_ONLY=1 timeout 120 $N --clock-control none --section SourceCounters --section WarpStateStats \
    -k regex:$k -s 2 -c 1 --page source --print-source sass --csv .device/n/fp4moe bench moe --device cuda \
    --shape deepseek-v3 --tokens 1 --runners cuda.decode --no-auto --tactics "$T1" --iters 3 --warmup 1 \
    > $o/ncu-src-$k.csv 2> $o/ncu-src-$k.err
  echo "src $k rc=$? $(wc -l < $o/ncu-src-$k.csv)"
done
unset FP4MOE_TWO_KERNELS
$N --help | grep -iE "sampl|print-source" > $o/ncu-help.txt
cd $OUT && tar czf r.tgz r && rm -rf r
