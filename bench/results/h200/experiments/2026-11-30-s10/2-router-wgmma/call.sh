set -u
L=$PWD/.device/bin/lib; export LD_LIBRARY_PATH=$L
(timeout 240 .device/bin-b/test_cuda --gtest_filter='CudaMoeRoute.*' > $OUT/b_route_tests.txt 2>&1; echo "b route tests rc=$?"; tail -3 $OUT/b_route_tests.txt; grep -E "FAILED|Failure" $OUT/b_route_tests.txt | head -20)
(timeout 120 .device/bin-b/test_cuda --gtest_also_run_disabled_tests --gtest_filter='*Timings*' > $OUT/b_timings.txt 2>&1; echo "timings rc=$?"; grep -E "^(model|qwen3|glm|dsv3)" $OUT/b_timings.txt)
SHAPES="glm-4.5-air deepseek-v3 qwen3-30b-a3b" TOKENS=256,1024,4096,16384 TACTICS='rows=256' TIMEOUT=120 bash scripts/gpu_ab.sh $OUT/ab .device/bin-a/fp4moe .device/bin-b/fp4moe
cd $OUT && tar czf ab.tgz ab && rm -rf ab
