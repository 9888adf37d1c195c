set -u
L=$PWD/.device/bin/lib; export LD_LIBRARY_PATH=$L
TOKENS=4096 TACTICS='rows=256|gate_up' TIMEOUT=40 bash scripts/gpu_ab.sh $OUT/ab .device/bin-main/fp4moe .device/bin-pfl/fp4moe 2>&1 | cut -c1-120
(timeout 85 .device/bin-pfl/test_cuda --gtest_filter='*Grouped*' > $OUT/tests_pfl.txt 2>&1; echo "pfl tests rc=$?"; grep -E "PASSED|FAILED|Failure|tests ran" $OUT/tests_pfl.txt | head -20)
cd $OUT && tar czf ab.tgz ab && rm -rf ab
