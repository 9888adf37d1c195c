#!/usr/bin/env bash
# The H200 acceptance benchmark of the CUDA runners (issues 4 and 7), side by side with the PyTorch peer.
# Run on the GPU machine after `scripts/gpu_test.sh build` here (carry build-gpu/). Writes into OUT_DIR
# (default bench/results/h200): per shape the bench moe JSON/markdown, the peer's JSON, and the joined table;
# then acceptance.md, issue 4's table with each row checked against its bar (bench/acceptance.py).
#   bash scripts/gpu_bench.sh [OUT_DIR] [TOKENS]
set -euo pipefail
# SHAPES (default: glm-4.5-air deepseek-v3 qwen3-30b-a3b) and BENCH_ARGS (extra bench moe flags) narrow a run.
root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
out=${1:-$root/bench/results/h200}
tokens=${2:-1,4,16,64}
fp4moe=${FP4MOE:-$root/build-gpu/tools/fp4moe} # FP4MOE: another build of the binary
mkdir -p "$out"
nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.mem --format=csv,noheader || true
for shape in ${SHAPES:-glm-4.5-air deepseek-v3 qwen3-30b-a3b}; do
    "$fp4moe" bench moe --device cuda --shape "$shape" --tokens "$tokens" ${BENCH_ARGS:-} \
        --json "$out/$shape.json" --md "$out/$shape.md" | tee "$out/$shape.txt"
    python3 "$root/bench/peers/torch_grouped_mm.py" --shape "$shape" --tokens "$tokens" \
        --json "$out/torch-$shape.json" > "$out/torch-$shape.log" 2>&1 || echo "torch peer failed: see $out/torch-$shape.log"
    python3 "$root/bench/join.py" "$out/$shape.json" "$out/torch-$shape.json" --md "$out/joined-$shape.md" \
        --plot "$out/joined-$shape.png" --best-per-runner || true
done
# Issue 4's acceptance table: per shape and T the auto row, the fastest listed row, the peer, and the bars.
python3 "$root/bench/acceptance.py" "$out" --md "$out/acceptance.md" || echo "acceptance table failed: see above"
