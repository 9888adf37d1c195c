#!/usr/bin/env bash
# Sets up, builds, and runs the main job: an NVFP4 MoE checkpoint loaded and run on the CPU.
# With no model given it uses (and if needed creates, saying so) the tiny generated model in models/tiny.
# Usage: scripts/run.sh [MODEL_DIR] [PROMPT]
set -euo pipefail
root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
bash "$root/scripts/setup.sh"
bash "$root/scripts/build.sh" >/dev/null
fp4moe=$root/build/tools/fp4moe
model=${1:-$root/models/tiny}
prompt=${2:-"Write one sentence about mixture-of-experts models."}
if [ ! -f "$model/config.json" ]; then
    if [ $# -ge 1 ]; then echo "run.sh: $model has no config.json" >&2; exit 2; fi
    echo "run.sh: no model given; creating the tiny generated model in $model (random weights, real NVFP4 format)"
    "$fp4moe" make-model --preset tiny --out "$model"
fi
echo "\$ fp4moe inspect $model --no-tensors"
"$fp4moe" inspect "$model" --no-tensors
echo
echo "\$ fp4moe generate --model $model --chat --prompt \"$prompt\""
"$fp4moe" generate --model "$model" --chat --prompt "$prompt" --max-tokens 64
echo
