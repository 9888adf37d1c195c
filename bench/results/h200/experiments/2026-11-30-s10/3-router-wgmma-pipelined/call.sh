set -u
L=$PWD/.device/bin/lib; export LD_LIBRARY_PATH=$L
(timeout 240 .device/bin-c/test_cuda --gtest_filter='CudaMoeRoute.*' > $OUT/c_route_tests.txt 2>&1; echo "c route tests rc=$?"; grep -E "PASSED|FAILED|Failure" $OUT/c_route_tests.txt | head -20)
for b in b c b c; do (timeout 120 .device/bin-$b/test_cuda --gtest_also_run_disabled_tests --gtest_filter='*Timings*' > $OUT/${b}_timings.txt 2>&1; echo "timings $b rc=$?"; grep -E "^(model|qwen3|glm|dsv3) +(T|256|512|1024|4096|16384) " $OUT/${b}_timings.txt | cut -c1-30,140-); done
