#!/usr/bin/env bash
# s28 call 4: traces with one more mark (slot 7: the end of the group lookup, in place of blockIdx.x), no stagger:
# glm-4.5-air T = 1 with ksplit 2 and 4 (5 and 6 CTAs per SM), qwen3-30b-a3b T = 1 (auto, 6 CTAs per SM).
set -u
export LD_LIBRARY_PATH=$PWD/.device/lib
o=$OUT/r; mkdir -p $o
FP4MOE_TRACE=$o/glm timeout 60 .device/t/fp4moe bench moe --device cuda --shape glm-4.5-air --tokens 1 --runners cuda.decode \
  --no-auto --tactics 'nt=1 ksplit=2 bulk 2x4 ksteps, down ksplit=1|nt=1 ksplit=4 bulk 2x4 ksteps, down ksplit=1' > $o/glm.txt 2>&1
FP4MOE_TRACE=$o/qwen timeout 60 .device/t/fp4moe bench moe --device cuda --shape qwen3-30b-a3b --tokens 1 --runners cuda.decode \
  --no-auto --tactics 'nt=1 ksplit=4 bulk 2x4 ksteps, down ksplit=2, 6 CTAs' > $o/qwen.txt 2>&1
grep -h "^cuda" $o/glm.txt $o/qwen.txt | cut -c1-130
cd $OUT && tar czf r.tgz r && rm -rf r
