#!/usr/bin/env bash
# Configures and builds fp4moe. Usage: scripts/build.sh [--build-dir DIR] [--sanitize] [--werror] [-- CMAKE_ARGS...]
#   --sanitize  AddressSanitizer + UndefinedBehaviorSanitizer build of the C++ code (CUDA off), in build-asan/
#   --werror    warnings are errors (the test and CI builds use it)
# CUDA is built when nvcc is found (FP4MOE_CUDA=AUTO); pass -- -DFP4MOE_CUDA=OFF to skip it.
set -euo pipefail
root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
build_dir=""
args=()
sanitize=0
while (($#)); do
    case "$1" in
    --build-dir) build_dir=$2; shift 2 ;;
    --sanitize) sanitize=1; shift ;;
    --werror) args+=(-DFP4MOE_WERROR=ON); shift ;;
    --) shift; args+=("$@"); break ;;
    *) echo "build.sh: unknown argument '$1'" >&2; exit 2 ;;
    esac
done
if ((sanitize)); then
    build_dir=${build_dir:-$root/build-asan}
    args+=(-DFP4MOE_SANITIZE=address,undefined -DFP4MOE_CUDA=OFF -DCMAKE_BUILD_TYPE=RelWithDebInfo)
fi
build_dir=${build_dir:-$root/build}
# nvcc is on PATH on most CUDA installs, but not always: pick up the default toolkit location.
if ! command -v nvcc >/dev/null && [ -x /usr/local/cuda/bin/nvcc ]; then export PATH=/usr/local/cuda/bin:$PATH; fi
cmake -S "$root" -B "$build_dir" -G Ninja "${args[@]}" >"$build_dir.cmake.log" 2>&1 || { cat "$build_dir.cmake.log"; exit 1; }
grep -E "^-- fp4moe:" "$build_dir.cmake.log" || true
jobs=${FP4MOE_BUILD_JOBS:-$(nproc)}
cmake --build "$build_dir" -j "$jobs"
