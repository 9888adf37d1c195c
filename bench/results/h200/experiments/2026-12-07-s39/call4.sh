#!/usr/bin/env bash
# s39 call 4: call 3 trimmed to the device time left (~100-150 s after a start): the A/B n / w (.device/n = main at
# 7b6b51a, .device/w = n + wide.patch) one round, per shape interleaved, then w's decode and grouped tests. Files stay
# under $OUT/r, so a run cut short still returns what it wrote.
set -u
export LD_LIBRARY_PATH=$PWD/.device/lib
name=$(nvidia-smi --query-gpu=name --format=csv,noheader | head -1); echo "$name"
case $name in *H200*) card=h200 ;; *H100*) card=h100 ;; *) card=other ;; esac
o=$OUT/r/$card; mkdir -p $o
for s in qwen3-30b-a3b glm-4.5-air deepseek-v3; do
  for b in n w; do
    timeout 40 .device/$b/fp4moe bench moe --device cuda --shape $s --tokens 1,4,16,64 --runners cuda.decode \
      --json $o/ab-$b-$s.json > $o/ab-$b-$s.txt 2>&1 || echo "bench $b $s failed"
    python3 -c "
import json; r = json.load(open('$o/ab-$b-$s.json'))['rows']
print('$b $s', ' '.join('T=%d %.1f' % (t, min(x['us'] for x in r if x['tokens'] == t)) for t in (1, 4, 16, 64)))" 2>&1 | tail -1
  done
done
timeout 120 .device/w/test_cuda --gtest_filter='*Decode*:*Grouped*' > $o/gpu_test-w.log 2>&1; echo "test_cuda w rc=$?"
grep -E "^\[  (PASSED|FAILED)|FAILED" $o/gpu_test-w.log | head -8
