#!/usr/bin/env bash
# s42 call 10, for the session's last device minutes: on an H200 only, f's acceptance run (scripts/gpu_bench.sh,
# main's kernels), tarred every 15 s so that a run cut at the device limit still returns what it wrote.
set -u
export LD_LIBRARY_PATH=$PWD/.device/lib
name=$(nvidia-smi --query-gpu=name --format=csv,noheader | head -1); echo "$name"
case $name in *H200*) ;; *) echo "not an H200: nothing to measure here"; exit 0 ;; esac
o=$OUT/r/h200; mkdir -p $o
pack() { (cd $OUT && tar czf 0-s42-call10.tgz.part r && mv 0-s42-call10.tgz.part 0-s42-call10.tgz); }
(while sleep 15; do pack; done) & loop=$!
FP4MOE=$PWD/.device/f/fp4moe bash scripts/gpu_bench.sh $o/accept 1,4,16,64 > $o/accept-run.log 2>&1
echo "gpu_bench rc=$?"; kill $loop; pack
python3 bench/results/h200/experiments/2026-12-05-s30/table.py $o/accept; tail -1 $o/accept/acceptance.md
rm -rf $OUT/r
