set -u
L=$PWD/.device/bin/lib; export LD_LIBRARY_PATH=$L
TOKENS=1024,4096,16384 TACTICS='rows=256|bn=256' TIMEOUT=150 bash scripts/gpu_ab.sh $OUT/ab .device/bin-main/fp4moe .device/bin-mix/fp4moe 2>&1 | cut -c1-110
(timeout 200 .device/bin-main/test_cuda > $OUT/test_cuda.txt 2>&1; echo "test_cuda rc=$?"; grep -E "PASSED|FAILED|Failure|tests ran" $OUT/test_cuda.txt | head -20)
SHAPES="glm-4.5-air deepseek-v3 qwen3-30b-a3b" FP4MOE=$PWD/.device/bin-main/fp4moe BENCH_ARGS="--tactics default" bash scripts/gpu_bench.sh $OUT/prefill 1,4,16,64,256,512,1024,4096,16384 > $OUT/sweep.log 2>&1; echo "sweep rc=$?"
grep -E "^auto" $OUT/prefill/*.txt | grep -E " (1|4|16|64|1024|4096|16384) " | cut -c1-150
cd $OUT && tar czf ab.tgz ab && rm -rf ab && tar czf prefill.tgz prefill && rm -rf prefill
