set -u
L=$PWD/.device/bin/lib; export LD_LIBRARY_PATH=$L
(timeout 240 .device/bin-d/test_cuda > $OUT/test_cuda.txt 2>&1; echo "test_cuda rc=$?"; grep -E "PASSED|FAILED|Failure|tests ran" $OUT/test_cuda.txt | head -20)
for b in c d; do (timeout 120 .device/bin-$b/test_cuda --gtest_also_run_disabled_tests --gtest_filter='*Timings*' > $OUT/${b}_timings.txt 2>&1; echo "timings $b rc=$?"; grep -E "^(model|qwen3|glm|dsv3) +(T|256|512|1024|4096|16384) " $OUT/${b}_timings.txt | cut -c1-80); done
SHAPES="glm-4.5-air deepseek-v3 qwen3-30b-a3b" FP4MOE=$PWD/.device/bin-d/fp4moe BENCH_ARGS="--tactics default" bash scripts/gpu_bench.sh $OUT/prefill 1,4,16,64,256,512,1024,4096,16384 > $OUT/sweep.log 2>&1; echo "sweep rc=$?"
grep -E "^auto|^cuda.grouped|^cuda.decode" $OUT/prefill/*.txt | grep -E " (1|4|16|64|4096|16384) " | cut -c1-150 | head -80
cd $OUT && tar czf prefill.tgz prefill && rm -rf prefill
