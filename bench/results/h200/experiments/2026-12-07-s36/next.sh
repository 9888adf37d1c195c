#!/usr/bin/env bash
# Next session's first call (NOTES item 0c): where the layer's GEMM kernels let the next kernel launch. Binaries built
# in the thirty-sixth session, carried as .device/pack.tar.xz (unpack first): .device/x = main at 0395278 (release at
# each kernel's start, as today); .device/n1 = main + release-late.patch (down releases after its epilogue);
# .device/n2 = the same patch built with FP4MOE_RELEASE_LATE_GATE_UP=1 (gate_up releases after its epilogue too).
# n1's and n2's decode and routing GPU tests, then every tactic, T = 1, 4, 16, 64, x / n1 / n2 interleaved, two rounds;
# best row per T for each binary. (The memory-only model, stream_pattern.cu modes 0, 6, 7, read the T = 1 chain
# 9-12 % faster with late release.)
set -u
export LD_LIBRARY_PATH=$PWD/.device/lib
nvidia-smi --query-gpu=name --format=csv,noheader | head -1
o=$OUT/r; mkdir -p $o
for b in n1 n2; do
  timeout 100 .device/$b/test_cuda --gtest_filter='*Decode*:*MoeRoute*' > $o/gpu_test-$b.log 2>&1; echo "test_cuda ($b) rc=$?"
  grep -E "^\[  (PASSED|FAILED)|tests ran|Failure|FAILED" $o/gpu_test-$b.log | head -10
done
for r in 1 2; do for s in glm-4.5-air deepseek-v3 qwen3-30b-a3b; do for b in x n1 n2; do
  timeout 80 .device/$b/fp4moe bench moe --device cuda --shape $s --tokens 1,4,16,64 --runners cuda.decode --no-auto \
    --json $o/$b-$s-r$r.json > $o/$b-$s-r$r.txt 2>&1 || echo "bench $b $s r$r failed"
done; done; done
for s in glm-4.5-air deepseek-v3 qwen3-30b-a3b; do for b in x n1 n2; do
  echo "== $s $b (best per T)"
  python3 - $o/$b-$s-r*.json <<'PY'
import json, sys
best = {}
for f in sys.argv[1:]:
    for r in json.load(open(f))['rows']:
        t = r['tokens']
        if t not in best or r['us'] < best[t][0]: best[t] = (r['us'], r['pct_floor'], r['tactic'])
for t in sorted(best): print(t, '%.1f us %.1f %%' % best[t][:2], best[t][2])
PY
done; done
cd $OUT && tar czf r.tgz r && rm -rf r
