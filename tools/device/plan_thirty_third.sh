#!/usr/bin/env bash
# The thirty-third slice's first call (2026-12-06, on 7d32178), three builds carried:
#   deepinfer-before / cuda_ops_bench-before: 7d32178 with the route bench's moe_rows_fp8 row only;
#   deepinfer-rows: + thirty-second-rows-fp8-per-token.patch (moe_rows_fp8 a warp per (token, 512
#     columns), the quantised row stored to its k slots);
#   deepinfer / cuda_ops_bench / the tests: + wq_b's cuBLASLt output in bf16 and the q tail
#     (head_norm_rope_bf16_in) reading it (at 256 rows wq_b's fp32 output, 33.5 MB, was more bytes
#     than its weight).
# Tests (the final build): the experts' tests, the model ops (HeadNormRope*), V4 model, synthetic,
# engine; memcheck over MoeRowsFp8AnyWidth and the bf16 tail. Route bench's moe_rows_fp8 row A / B;
# model: EP b256 before / rows / final, b8 and b128 and the 8k prefill rows / final.
set -uo pipefail
source "$(dirname "$0")/loops.sh"
plan_start
run_test_specs 60:cuda_experts_test "30:cuda_model_ops_test:CudaModelOps.HeadNormRope*" 60:cuda_v4_model_test \
  60:cuda_v4_synthetic_test 60:cuda_v4_engine_test
run_sanitized "$BIN" 60 "memcheck:cuda_experts_test:CudaExperts.MoeRowsFp8AnyWidth" \
  "memcheck:cuda_model_ops_test:CudaModelOps.HeadNormRopeFromBf16MatchesFp32Form"
echo "tests rc=${TEST_RC:-?} san rc=${SAN_RC:-?} ($((SECONDS - START)) s)"
for r in route:256:32 route:8:256; do ops_ab "$r" "moe_rows_fp8" 1; done
ep="--synthetic v4-flash-ep8 --batch 256 --gen-len 4 --fill-state --prompt-len 4096"
f4="--synthetic v4-flash:4 --gen-len 8 --fill-state --prompt-len 4096"
export BENCH_CONFIGS="${BENCH_CONFIGS:-before-ep256c4k $ep
rows-ep256c4k $ep
ep256c4k $ep
rows-b128 $f4 --batch 128
b128 $f4 --batch 128
rows-p8k --synthetic v4-flash:4 --batch 1 --prompt-len 8192 --gen-len 2
p8k --synthetic v4-flash:4 --batch 1 --prompt-len 8192 --gen-len 2
rows-ep256c4k2 $ep
ep256c4k2 $ep
before-ep256c4k2 $ep}"
run_benches "$BIN/deepinfer" "${BENCH_S:-240}" | grep -E "rc=|^decode |^prefill |^decode step parts" | cut -c1-150
plan_finish
echo "done ($((SECONDS - START)) s)"
