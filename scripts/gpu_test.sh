#!/usr/bin/env bash
# GPU tests. Two halves, because the GPU machine has no package registry:
#   scripts/gpu_test.sh build   (here)        builds build-gpu/ (CUDA on, sm_90 + sm_90a, static cudart)
#   scripts/gpu_test.sh run     (GPU machine) runs `ctest -L cuda` in build-gpu/ and prints a summary
#   scripts/gpu_test.sh         (a machine with both a GPU and the build dependencies) does both
# With the device tool: build here, then run `bash scripts/gpu_test.sh run` there with carry: ["build-gpu"].
set -euo pipefail
root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
build_dir=$root/build-gpu
mode=${1:-all}

if [ "$mode" = build ] || [ "$mode" = all ]; then
    bash "$root/scripts/build.sh" --build-dir "$build_dir" --werror -- -DFP4MOE_CUDA=ON
    # The GPU machine has no package registry: put the non-libc shared libraries fp4moe links (cpp-httplib,
    # OpenSSL, zlib, brotli, PCRE2) in build-gpu/lib, where the binary's RPATH ($ORIGIN/../lib) looks first.
    # On a rebuild ldd already resolves them there (the RPATH): those are skipped, not copied onto themselves.
    mkdir -p "$build_dir/lib"
    lib_dir=$(realpath "$build_dir/lib")
    ldd "$build_dir/tools/fp4moe" | awk '/=> \//{print $3}' | while read -r lib; do
        [ "$(dirname "$(realpath "$lib")")" = "$lib_dir" ] && continue
        case $(basename "$lib") in libc.so*|libm.so*|libgcc_s*|libstdc++*|ld-linux*) ;; *) cp -L "$lib" "$build_dir/lib/" ;; esac
    done
fi
if [ "$mode" = run ] || [ "$mode" = all ]; then
    [ -f "$build_dir/CMakeCache.txt" ] || { echo "gpu_test.sh: no $build_dir; run 'scripts/gpu_test.sh build' first" >&2; exit 2; }
    # CTest files hold absolute paths of the machine that built them: make them resolve on this one too.
    built_root=$(sed -n 's/^CMAKE_HOME_DIRECTORY:INTERNAL=//p' "$build_dir/CMakeCache.txt")
    if [ "$built_root" != "$root" ] && [ ! -e "$built_root" ]; then
        mkdir -p "$(dirname "$built_root")" && ln -s "$root" "$built_root"
    fi
    nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv,noheader 2>/dev/null || echo "nvidia-smi: not available"
    set +e
    ctest --test-dir "$build_dir" -L cuda --output-on-failure 2>&1 | tee "$build_dir/gpu_test.log"
    rc=${PIPESTATUS[0]}
    set -e
    echo
    echo "== GPU test summary =="
    grep -E "tests passed|tests failed|\*\*\*Skipped|Failed|Passed" "$build_dir/gpu_test.log" | grep -E "Skipped|tests passed|Failed " | tail -40
    exit "$rc"
fi
