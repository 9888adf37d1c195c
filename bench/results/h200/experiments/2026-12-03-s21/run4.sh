#!/usr/bin/env bash
# Session 21 call 4: deepseek-v3 T = 4096 auto alone, inside the sweep's token list, and alone again; clocks sampled.
set -u
export LD_LIBRARY_PATH=$PWD/.device/lib
D=$OUT/r; mkdir -p $D
nvidia-smi --query-gpu=timestamp,clocks.sm,power.draw,temperature.gpu --format=csv -lms 500 > $D/smi.csv 2>&1 &
S=$!
B=.device/t/fp4moe
a() { date +%T.%N > $D/$1.time; timeout 90 $B bench moe --device cuda --shape deepseek-v3 --tokens $2 --tactics default > $D/$1.txt 2>&1; date +%T.%N >> $D/$1.time; grep -E "^auto" $D/$1.txt | tr -s ' ' | sed -E 's/.*\] //' | tr '\n' ' '; echo " $1"; }
a alone1 4096
a sweep 1,4,16,64,256,512,1024,4096,16384
a alone2 4096
kill $S
cd $OUT && tar czf r.tgz r
