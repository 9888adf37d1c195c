#!/usr/bin/env bash
# Builds the libFuzzer targets with clang (ASan + UBSan) in their own build directory and runs each for a
# bounded time. Exits non-zero when a target crashes, leaks, or hits undefined behaviour; the reproducer is
# written to $BUILD/fuzz-artifacts/.
#
#   scripts/fuzz.sh                 # every target, 60 s each
#   FUZZ_SECONDS=30 scripts/fuzz.sh fuzz_safetensors_header
#
# Env: FUZZ_SECONDS (default 60), FUZZ_BUILD_DIR (default build-fuzz), FUZZ_CXX (default clang++, else
# clang++-14), FUZZ_JOBS (parallel fuzzing processes, default 1).
set -euo pipefail

root=$(cd "$(dirname "$0")/.." && pwd)
build=${FUZZ_BUILD_DIR:-$root/build-fuzz}
seconds=${FUZZ_SECONDS:-60}
jobs=${FUZZ_JOBS:-1}
cxx=${FUZZ_CXX:-}
if [ -z "$cxx" ]; then
    for c in clang++ clang++-14; do
        if command -v "$c" >/dev/null; then cxx=$c; break; fi
    done
fi
[ -n "$cxx" ] || { echo "fuzz.sh: clang++ not found (scripts/setup.sh installs it)" >&2; exit 2; }

targets=("$@")
[ ${#targets[@]} -gt 0 ] || targets=(fuzz_safetensors_header)

cmake -S "$root" -B "$build" -G Ninja -DCMAKE_CXX_COMPILER="$cxx" -DCMAKE_BUILD_TYPE=RelWithDebInfo \
    -DFP4MOE_FUZZ=ON -DFP4MOE_TESTS=OFF -DFP4MOE_CUDA=OFF >/dev/null
cmake --build "$build" --target "${targets[@]}"

export UBSAN_OPTIONS=${UBSAN_OPTIONS:-print_stacktrace=1:halt_on_error=1}
mkdir -p "$build/fuzz-artifacts"
for t in "${targets[@]}"; do
    seeds="$root/tests/fuzz/corpus/${t#fuzz_}"
    work="$build/fuzz-corpus/${t#fuzz_}" # new inputs land here, not in the committed seeds
    mkdir -p "$work"
    dict=()
    [ -f "$root/tests/fuzz/${t#fuzz_}.dict" ] && dict=(-dict="$root/tests/fuzz/${t#fuzz_}.dict")
    echo "fuzz.sh: $t for ${seconds}s"
    par=()
    # NOTE: with -jobs libFuzzer forks workers that log to fuzz-N.log; only use it when asked.
    [ "$jobs" -gt 1 ] && par=(-jobs="$jobs" -workers="$jobs")
    (cd "$build" && "$build/tests/fuzz/$t" "${dict[@]}" "${par[@]}" -max_len=4096 -max_total_time="$seconds" \
        -timeout=10 -rss_limit_mb=2048 -print_final_stats=1 -artifact_prefix="$build/fuzz-artifacts/$t-" \
        "$work" "$seeds") || {
        echo "fuzz.sh: $t failed (libFuzzer exit $?); reproducer in $build/fuzz-artifacts/" >&2
        exit 1
    }
done
echo "fuzz.sh: no crashes"
