#!/usr/bin/env bash
# The thirty-second slice's third call (2026-12-06, on 0bbebfc): moe_rows_fp8 one warp per (token,
# 512 columns) storing the quantised row to each of its k slots (was a warp per slot: each token
# row loaded and quantised k = 6 times at the EP step). Same bytes out. Tests (the experts' tests:
# MoeRowsFp8AnyWidth at k = 2 into shuffled slots and k = 1, the FP8 experts step by step; V4
# model, synthetic), memcheck over MoeRowsFp8AnyWidth; the route bench's new moe_rows_fp8 row
# (before: 0bbebfc with the bench hunk only), the FP8 experts op bench (its w2 rows: k = 1), the
# EP step A / B.
set -uo pipefail
source "$(dirname "$0")/loops.sh"
plan_start
run_test_specs 60:cuda_experts_test 50:cuda_v4_model_test 50:cuda_v4_synthetic_test
run_sanitized "$BIN" 60 "memcheck:cuda_experts_test:CudaExperts.MoeRowsFp8AnyWidth"
echo "tests rc=${TEST_RC:-?} san rc=${SAN_RC:-?} ($((SECONDS - START)) s)"
for r in route:256:32 route:8:256 route:1:256; do ops_ab "$r" "moe_rows_fp8" 1; done
ops_ab "moe:32:48" "moe_fp8_tiled" 1
export BENCH_CONFIGS="${BENCH_CONFIGS:-$(ab_pairs "ep256c4k --synthetic v4-flash-ep8 --batch 256 --gen-len 4 --fill-state --prompt-len 4096
b8 --synthetic v4-flash:4 --gen-len 8 --fill-state --prompt-len 4096 --batch 8")}"
run_benches "$BIN/deepinfer" "${BENCH_S:-120}" | grep -E "rc=|^decode |^decode step parts" | cut -c1-150
plan_finish
echo "done ($((SECONDS - START)) s)"
