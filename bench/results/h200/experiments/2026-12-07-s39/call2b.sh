#!/usr/bin/env bash
# s39 call 2b (the same warm H100, right after call 2; run as one bash -c line): the acceptance form of the new layout's
# binary (.device/n, 92846c2 + the register-3 multiply layout, committed as 786d02b) into $OUT/r/h100, then r3.tgz.
cd .device && tar xJf pack.tar.xz && cd ..
export LD_LIBRARY_PATH=$PWD/.device/lib
nvidia-smi --query-gpu=name --format=csv,noheader
mkdir -p $OUT/r/h100
FP4MOE=$PWD/.device/n/fp4moe timeout 200 bash scripts/gpu_bench.sh $OUT/r/h100 1,4,16,64 > $OUT/r/h100/decode-run.log 2>&1; echo bench rc=$?
cat $OUT/r/h100/acceptance.md | tail -22
cd $OUT && tar czf r3.tgz r && rm -rf r
