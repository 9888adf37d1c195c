#!/usr/bin/env bash
# s25 call 5: where route_token's time goes (call 4: the routing warp's top-k stage is 4.5-10 K cycles and not
# instruction fetch). .device/n = call 4's build + rt-marks.patch (clock64 marks inside route_token, thread 0).
set -u
export LD_LIBRARY_PATH=$PWD/.device/lib
o=$OUT/r; mkdir -p $o
export FP4MOE_TWO_KERNELS=1
T1='nt=1 ksplit=2 bulk 2x4 ksteps, down ksplit=1'
for s in glm-4.5-air deepseek-v3 qwen3-30b-a3b; do for T in 1 4; do
  FP4MOE_ROUTING_ONLY=1 timeout 60 .device/n/fp4moe bench moe --device cuda --shape $s --tokens $T --runners cuda.decode \
    --no-auto --tactics "$T1" --iters 20 --warmup 3 > $o/m-$s-$T.txt 2>&1
  echo "== $s T=$T"; grep -E "RPMARK|RTMARK" $o/m-$s-$T.txt | tail -4
done; done
cd $OUT && tar czf r.tgz r && rm -rf r
