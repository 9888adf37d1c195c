set -u
L=$PWD/.device/bin/lib; export LD_LIBRARY_PATH=$L
(timeout 200 .device/bin-a/test_cuda --gtest_filter='*Grouped*' > $OUT/a_tests.txt 2>&1; echo "a tests rc=$?"; tail -3 $OUT/a_tests.txt; grep -E "FAILED|Failure" $OUT/a_tests.txt | head -20)
TOKENS=1024,4096,16384 TACTICS='rows=256|bn=256' TIMEOUT=120 bash scripts/gpu_ab.sh $OUT/ab .device/bin-f/fp4moe .device/bin-a/fp4moe
cd $OUT && tar czf ab.tgz ab && rm -rf ab
