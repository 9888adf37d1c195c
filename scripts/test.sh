#!/usr/bin/env bash
# Sets up, builds (warnings as errors) and runs every CPU test. Usage: scripts/test.sh [--sanitize]
#   --sanitize  the same tests in an AddressSanitizer + UBSan build (build-asan/)
# GPU tests are labelled `cuda` and run on a GPU machine with scripts/gpu_test.sh.
set -euo pipefail
root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
bash "$root/scripts/setup.sh"
build_dir=$root/build
extra=()
if [ "${1:-}" = "--sanitize" ]; then
    build_dir=$root/build-asan
    extra=(--sanitize)
    export ASAN_OPTIONS=${ASAN_OPTIONS:-detect_leaks=1:abort_on_error=1}
    export UBSAN_OPTIONS=${UBSAN_OPTIONS:-print_stacktrace=1:halt_on_error=1}
fi
bash "$root/scripts/build.sh" --build-dir "$build_dir" --werror "${extra[@]}"
ctest --test-dir "$build_dir" -L cpu --output-on-failure -j "$(nproc)"
