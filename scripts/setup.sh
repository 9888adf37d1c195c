#!/usr/bin/env bash
# Installs every build and test dependency of fp4moe: Debian packages for the C++ build, PyPI packages
# for the cross-check scripts. Idempotent: packages already present are skipped. Works with or without
# the CUDA toolkit (CUDA is optional; the build enables it when nvcc is found).
set -euo pipefail

debs=(
    build-essential cmake ninja-build git pkg-config
    clang clang-format libclang-rt-dev     # libFuzzer + sanitizers, formatting
    nlohmann-json3-dev                     # JSON
    libcli11-dev                           # command line
    libspdlog-dev libfmt-dev               # logging, formatting
    libgtest-dev libgmock-dev              # tests
    libbenchmark-dev                       # micro-benchmarks
    libpcre2-dev                           # regex (tokenizer pre-tokenizers)
    libcpp-httplib-dev                     # HTTP server and client
    python3 python3-pip
)

missing=()
for p in "${debs[@]}"; do
    dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
if ((${#missing[@]})); then
    echo "setup: installing Debian packages: ${missing[*]}"
    sudo_cmd=""
    [ "$(id -u)" -eq 0 ] || sudo_cmd="sudo"
    $sudo_cmd apt-get update -qq
    DEBIAN_FRONTEND=noninteractive $sudo_cmd apt-get install -y -qq --no-install-recommends "${missing[@]}"
fi

# Python packages used by the interop tests (ml_dtypes cross-check, safetensors fixtures) and plots.
py=${PYTHON:-python3}
pips=(numpy ml_dtypes safetensors matplotlib tokenizers)
need_pip=()
for m in "${pips[@]}"; do
    "$py" -c "import $m" 2>/dev/null || need_pip+=("$m")
done
if ((${#need_pip[@]})); then
    echo "setup: installing PyPI packages: ${need_pip[*]}"
    "$py" -m pip install -q --disable-pip-version-check "${need_pip[@]}" ||
        "$py" -m pip install -q --disable-pip-version-check --break-system-packages "${need_pip[@]}"
fi
echo "setup: dependencies ready"
