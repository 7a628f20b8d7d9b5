#!/usr/bin/env bash
# The thirty-eighth slice's second plan (2026-12-07, written and run the same session; ran on an H100
# at ~09:15 UTC: tests, racecheck and memcheck clean; device ms b1 1.158 -> 1.151 (ac) -> 1.133,
# b8 1.876 -> 1.854 -> 1.865, b16 2.471 -> 2.443 -> 2.483: ac landed, the clusters kept to 4 tokens,
# plan_thirty_eighth_c.sh): three
# same-bits changes to batch 1's small kernels (the thirty-seventh slice's ncu table):
# - ac: the sub-layer's hc_pre with its norm at <= 32 tokens spread over the token's d/1024 column
#   blocks (hc_finish_pack_kernel: every block loads the token's X at once, the input row in shared
#   memory, its own 1024 columns' norm and forms; was one block a token, 8.3 us), and the query
#   heads' tail in blocks of 2 warps up to 1,024 rows (4.7 us on 8 SMs at batch 1);
# - deepinfer (ac + the post's next partials in clusters of 4 blocks, each 6 of fn's 24 rows:
#   48 KB of fn a block instead of 196 KB on one SM).
# Tests: layer ops (the mHC bitwise tests), model ops (the heads' tail), model / synthetic / engine;
# memcheck and racecheck over the two mHC tests; then A/B (before = 325547c) and batch 1's kernel table.
# Build (here): deepinfer-ac = the build without the cluster post; pack deepinfer, deepinfer-ac,
#   deepinfer-before and the five test binaries; run(carry=[".device-bin.tar.xz"], timeout_s=480,
#   command="tar xJf .device-bin.tar.xz && tools/device/plan_thirty_eighth_b.sh")
set -uo pipefail
source "$(dirname "$0")/loops.sh"
plan_start
run_test_specs "60:cuda_layer_ops_test:CudaLayerOps.Hc*" "60:cuda_model_ops_test:*NormRope*" \
  80:cuda_v4_model_test 90:cuda_v4_synthetic_test 80:cuda_v4_engine_test
echo "tests rc=${TEST_RC:-?} ($((SECONDS - START)) s)"
run_sanitized "$BIN" 90 "racecheck:cuda_layer_ops_test:CudaLayerOps.HcPostNextPartialsBitwise" \
  "memcheck:cuda_layer_ops_test:CudaLayerOps.HcPostNextPartialsBitwise:CudaLayerOps.HcPreNormPackBitwise"
echo "sanitizers rc=${SAN_RC:-?} ($((SECONDS - START)) s)"
f4="--synthetic v4-flash:4 --gen-len 8 --fill-state --prompt-len 4096"
cfg="b1 $f4 --batch 1
b8 $f4 --batch 8
b16 $f4 --batch 16
b32 $f4 --batch 32
b1b $f4 --batch 1"
export BENCH_CONFIGS="$(while read -r n a; do printf '%s %s\nac-%s %s\nbefore-%s %s\n' "$n" "$a" "$n" "$a" "$n" "$a"; done <<< "$cfg")"
run_benches "$BIN/deepinfer" 150 | grep -E "rc=|^decode " | cut -c1-150
bench_device_ms
ncu_step_table $((440 - (SECONDS - START))) "--synthetic v4-flash:4 --batch 1 --prompt-len 4096 --fill-state --gen-len 8" 40
plan_finish
echo "done ($((SECONDS - START)) s)"
