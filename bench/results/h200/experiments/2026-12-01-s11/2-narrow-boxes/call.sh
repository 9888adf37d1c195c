set -u
L=$PWD/.device/bin/lib; export LD_LIBRARY_PATH=$L
TOKENS=1024,4096,16384 TACTICS='rows=256|bn=256' TIMEOUT=150 bash scripts/gpu_ab.sh $OUT/ab .device/bin-w8/fp4moe .device/bin-box/fp4moe .device/bin-ef/fp4moe 2>&1 | cut -c1-110
(timeout 150 .device/bin-ef/test_cuda --gtest_filter='*Grouped*' > $OUT/tests_ef.txt 2>&1; echo "ef tests rc=$?"; grep -E "PASSED|FAILED|Failure|tests ran" $OUT/tests_ef.txt | head -20)
cd $OUT && tar czf ab.tgz ab && rm -rf ab
