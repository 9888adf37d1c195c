#!/usr/bin/env bash
# Sets up, builds, and runs the main job. Today that is a short tour of what exists: the build, and
# `fp4moe inspect` on an NVFP4 checkpoint file written by Python's safetensors (committed as a fixture).
# Usage: scripts/run.sh [PATH]   (PATH: a .safetensors file or checkpoint directory to inspect instead)
set -euo pipefail
root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
bash "$root/scripts/setup.sh"
bash "$root/scripts/build.sh" >/dev/null
fp4moe=$root/build/tools/fp4moe
target=${1:-$root/tests/model/fixtures/pysafetensors.safetensors}
echo "\$ fp4moe --version"
"$fp4moe" --version
echo
echo "\$ fp4moe inspect $target"
"$fp4moe" inspect "$target"
