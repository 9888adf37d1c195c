set -u
L=$PWD/.device/bin/lib; export LD_LIBRARY_PATH=$L
NCU=$(command -v ncu || ls /usr/local/cuda/bin/ncu 2>/dev/null)
$NCU --version | tail -1
for cfg in "deepseek-v3 4096 0" "deepseek-v3 16384 0" "deepseek-v3 4096 1" "deepseek-v3 16384 1"; do
  set -- $cfg
  timeout 140 $NCU --clock-control none --graph-profiling node --kernel-name-base mangled -k regex:"grouped_gemm_kernelILb$3ELi128ELi4ELi2E" --launch-count 1 \
    --section SourceCounters --section WarpStateStats -o $OUT/r-$1-$2-$3 \
    .device/bin-c/fp4moe bench moe --device cuda --shape $1 --tokens $2 --runners cuda.grouped --tactics 'bn=128 stages=4 rows=256' --no-auto --warmup 0 --iters 1 > $OUT/log-$2-$3.txt 2>&1
  echo "== $1 $2 gateup=$3 rc=$?"; tail -2 $OUT/log-$2-$3.txt
  $NCU --import $OUT/r-$1-$2-$3.ncu-rep --page source --csv --print-source sass > $OUT/src-$2-$3.csv 2> $OUT/src-$2-$3.err; echo "export rc=$? $(wc -l < $OUT/src-$2-$3.csv) lines"; head -c 600 $OUT/src-$2-$3.err
  $NCU --import $OUT/r-$1-$2-$3.ncu-rep --page details > $OUT/det-$2-$3.txt 2>&1
done
head -3 $OUT/src-4096-0.csv | cut -c1-1500
cd $OUT && tar czf ncu.tgz src-*.csv det-*.txt log-*.txt && rm -f src-*.csv det-*.txt log-*.txt r-*.ncu-rep src-*.err
ls -la $OUT
