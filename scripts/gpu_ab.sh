#!/usr/bin/env bash
# Same-call A/B of fp4moe builds on the GPU machine: each binary benches every tactic of one runner on each
# shape, the builds interleaved per shape so that the H200's clock drift hits them alike (NOTES.md: up to 14 %
# between runs seconds apart). Build the binaries here and carry them; then, on the GPU machine:
#   bash scripts/gpu_ab.sh OUT_DIR path/to/fp4moe-A path/to/fp4moe-B [...]
# Writes OUT_DIR/<shape>-<n>.txt (n = the binary's position) and prints each run's rows.
set -uo pipefail
# SHAPES (default glm-4.5-air deepseek-v3), TOKENS (default 4096,16384), RUNNER (default cuda.grouped), TACTICS
# (bench moe --tactics: default all; e.g. "rows=256|W by TMA" for the rows an experiment compares) and
# TIMEOUT (seconds per run, default 120) narrow a run.
[ $# -ge 3 ] || {
    echo "usage: $0 OUT_DIR FP4MOE_A FP4MOE_B [FP4MOE_C ...]" >&2
    exit 2
}
out=$1
shift
mkdir -p "$out"
for shape in ${SHAPES:-glm-4.5-air deepseek-v3}; do
    n=0
    for bin in "$@"; do
        n=$((n + 1))
        timeout "${TIMEOUT:-120}" "$bin" bench moe --device cuda --shape "$shape" --tokens "${TOKENS:-4096,16384}" \
            --runners "${RUNNER:-cuda.grouped}" --tactics "${TACTICS:-all}" --no-auto > "$out/$shape-$n.txt" 2>&1
        echo "== $shape $n ($bin) rc=$? $(date +%T)"
        grep -E "^(cuda|cpu)\." "$out/$shape-$n.txt" | sed -E 's/  +/ /g' | cut -c1-100 || tail -n 2 "$out/$shape-$n.txt"
    done
done
