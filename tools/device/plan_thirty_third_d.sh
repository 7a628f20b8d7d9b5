#!/usr/bin/env bash
# The thirty-third slice's fourth call (2026-12-06, on 67101fe):
#   - moe_rows_fp8 loads its slots' rows 8 at a time (the first batch under the row loads), not one
#     round trip per slot before its stores (8 tokens x top-6: 2.97 -> 3.25 us with the per-token
#     kernel of a0df9be);
#   - from kRows16MinRows (4,096) routed rows, prefill only, the FP8 experts' SwiGLU and w2 rows in
#     bf16 (the third call's change, dropped at the EP step where they sit in L2; here they do not).
# Tests: experts (MoeRowsFp8AnyWidth now at top-k 2, 6, 11; the bf16 rows), MoeCombineHcPostBitwise,
# V4 model, synthetic, engine; memcheck over MoeRowsFp8AnyWidth. Route bench's moe_rows_fp8 A / B;
# the 8k prefill three times each, b8 twice each, the EP step once each (before: 67101fe).
set -uo pipefail
source "$(dirname "$0")/loops.sh"
plan_start
run_test_specs 60:cuda_experts_test "40:cuda_layer_ops_test:CudaLayerOps.MoeCombineHcPostBitwise" \
  60:cuda_v4_model_test 60:cuda_v4_synthetic_test 90:cuda_v4_engine_test
run_sanitized "$BIN" 40 "memcheck:cuda_experts_test:CudaExperts.MoeRowsFp8AnyWidth"
echo "tests rc=${TEST_RC:-?} san rc=${SAN_RC:-?} ($((SECONDS - START)) s)"
for r in route:1:256 route:8:256 route:256:32; do ops_ab "$r" "moe_rows_fp8" 1; done
ep="--synthetic v4-flash-ep8 --batch 256 --gen-len 4 --fill-state --prompt-len 4096"
f4="--synthetic v4-flash:4 --gen-len 8 --fill-state --prompt-len 4096"
p8k="--synthetic v4-flash:4 --batch 1 --prompt-len 8192 --gen-len 2"
export BENCH_CONFIGS="${BENCH_CONFIGS:-before-p8k $p8k
p8k $p8k
before-p8k2 $p8k
p8k2 $p8k
before-p8k3 $p8k
p8k3 $p8k
before-b8 $f4 --batch 8
b8 $f4 --batch 8
b8b $f4 --batch 8
before-b8b $f4 --batch 8
before-ep256c4k $ep
ep256c4k $ep}"
run_benches "$BIN/deepinfer" "${BENCH_S:-200}" | grep -E "rc=|^decode |^prefill |^decode step parts" | cut -c1-150
plan_finish
echo "done ($((SECONDS - START)) s)"
