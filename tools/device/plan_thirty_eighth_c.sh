#!/usr/bin/env bash
# The thirty-eighth slice's third plan (2026-12-07, written and run the same session; ran on an H100
# at ~09:22 UTC: tests and racecheck clean; device ms against ac b1 1.137 -> 1.135, b2 1.254 -> 1.243,
# b4 1.471 -> 1.462, b8 1.851 -> 1.855 (the same kernel); --fp8-wgmma-rows 1: b1 1.088, b8 1.794,
# hence plan_thirty_eighth_d.sh): the post's
# next partials in clusters of 4 blocks only up to 4 tokens (plan_thirty_eighth_b.sh: batch 1
# 1.153 -> 1.129 ms against deepinfer-ac, batch 8 1.854 -> 1.865, 16 2.443 -> 2.483), one block a
# column group above (the kernel before: the same template, R = 1).
# - tests: the mHC bitwise tests (the post at 1, 4, 5, 7, 16 tokens), model / synthetic / engine;
#   racecheck over the post's test;
# - A/B: batch 1, 2, 4, 8 against deepinfer-ac (the build with the 800-thread post at every size);
#   and batch 1 / 8 with --fp8-wgmma-rows 1 (the decode linears on the wgmma kernel: no code change).
# Build (here): pack deepinfer, deepinfer-ac (from plan_thirty_eighth_b.sh) and the four test
#   binaries; run(carry=[".device-bin.tar.xz"], timeout_s=300, command="tar xJf .device-bin.tar.xz &&
#   tools/device/plan_thirty_eighth_c.sh")
set -uo pipefail
source "$(dirname "$0")/loops.sh"
plan_start
run_test_specs "60:cuda_layer_ops_test:CudaLayerOps.Hc*" 80:cuda_v4_model_test 90:cuda_v4_synthetic_test \
  80:cuda_v4_engine_test
echo "tests rc=${TEST_RC:-?} ($((SECONDS - START)) s)"
run_sanitized "$BIN" 40 "racecheck:cuda_layer_ops_test:CudaLayerOps.HcPostNextPartialsBitwise"
echo "sanitizers rc=${SAN_RC:-?} ($((SECONDS - START)) s)"
f4="--synthetic v4-flash:4 --gen-len 8 --fill-state --prompt-len 4096"
cfg="b1 $f4 --batch 1
b2 $f4 --batch 2
b4 $f4 --batch 4
b8 $f4 --batch 8
b1b $f4 --batch 1"
export BENCH_CONFIGS="$(while read -r n a; do printf '%s %s\nac-%s %s\n' "$n" "$a" "$n" "$a"; done <<< "$cfg")
wg-b1 $f4 --batch 1 --fp8-wgmma-rows 1
wg-b8 $f4 --batch 8 --fp8-wgmma-rows 1"
run_benches "$BIN/deepinfer" 120 | grep -E "rc=|^decode " | cut -c1-150
bench_device_ms
plan_finish
echo "done ($((SECONDS - START)) s)"
