#!/usr/bin/env bash
# s43 call 11, for a call with under ~250 s of device time: on an H200 only, main's cuda.decode rows and its auto row
# (bench moe --runners cuda.decode; no cuda.grouped rows, no torch peer: those are the full run's, call10), the three
# shapes at T = 1/4/16/64, tarred every 10 s so that a cut run still returns what it wrote. Binaries: pack10.tar.xz.
set -u
export LD_LIBRARY_PATH=$PWD/.device/lib
name=$(nvidia-smi --query-gpu=name --format=csv,noheader | head -1); echo "$name"
case $name in *H200*) ;; *) echo "not an H200: nothing to measure here"; exit 0 ;; esac
o=$OUT/r/h200; mkdir -p $o
pack() { (cd $OUT && tar czf 0-s43-call11.tgz.part r && mv 0-s43-call11.tgz.part 0-s43-call11.tgz); }
(while sleep 10; do pack; done) & loop=$!
for s in glm-4.5-air deepseek-v3 qwen3-30b-a3b; do
  timeout 80 .device/f/fp4moe bench moe --device cuda --shape $s --tokens 1,4,16,64 --runners cuda.decode \
    --json $o/$s.json > $o/$s.txt 2>&1 || echo "bench $s failed"
  grep -E "^auto" $o/$s.txt | sed -E 's/ +/ /g' | cut -c1-140
done
kill $loop; pack; rm -rf $OUT/r
