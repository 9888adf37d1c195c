set -u
L=$PWD/.device/bin/lib; export LD_LIBRARY_PATH=$L
(timeout 200 .device/bin-f2/test_cuda --gtest_filter='*Grouped*' > $OUT/f2_tests.txt 2>&1; echo "f2 tests rc=$?"; grep -E "PASSED|FAILED|Failure" $OUT/f2_tests.txt | head -20)
TOKENS=1024,4096,16384 TACTICS='rows=256|bn=256' TIMEOUT=120 bash scripts/gpu_ab.sh $OUT/ab .device/bin-c/fp4moe .device/bin-f2/fp4moe
cd $OUT && tar czf ab.tgz ab && rm -rf ab
