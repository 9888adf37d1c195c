set -u
L=$PWD/.device/bin/lib; export LD_LIBRARY_PATH=$L
TOKENS=1024,4096,16384 TACTICS='rows=256|bn=256' TIMEOUT=150 bash scripts/gpu_ab.sh $OUT/ab .device/bin-w8/fp4moe .device/bin-box2/fp4moe .device/bin-pre/fp4moe 2>&1 | cut -c1-110
for b in box2 pre; do (timeout 150 .device/bin-$b/test_cuda --gtest_filter='*Grouped*' > $OUT/tests_$b.txt 2>&1; echo "$b tests rc=$?"; grep -E "PASSED|FAILED|Failure|tests ran" $OUT/tests_$b.txt | head -20); done
cd $OUT && tar czf ab.tgz ab && rm -rf ab
