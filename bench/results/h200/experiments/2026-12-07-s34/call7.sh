#!/usr/bin/env bash
# For the next session, so that whatever card the tool lends is used: on an H200, call 5 (the H200 landing check of
# main: .device/n built from main); on any other card, call 6 (the A/B of bycount.patch: .device/n = main,
# .device/x = main + bycount.patch). Build both here with `scripts/gpu_test.sh build` (copy tools/fp4moe and
# tests/test_cuda of each build into .device/{n,x}, the libraries into .device/lib) and carry .device.
set -u
name=$(nvidia-smi --query-gpu=name --format=csv,noheader | head -1)
d=bench/results/h200/experiments/2026-12-07-s34
case $name in
    *H200*) sed 's|\.device/x/|.device/n/|g' $d/call5.sh > /tmp/call5-main.sh && bash /tmp/call5-main.sh ;;
    *) bash $d/call6.sh ;;
esac
