#!/usr/bin/env bash
# The thirty-third slice's sixth call (2026-12-06, on af26372): the MoE combine's expert rows loaded
# 6 at a time before their sums (moe_combine4, used by moe_combine and the fused combine + mHC
# post), not a round trip per expert; the same sums in the same order. Tests: the fused combine's
# bitwise test (now also moe_combine against the host's fmas, top-k 6, 1, 8), the experts' CPU
# parity, V4 model, synthetic. Model A / B (before: af26372): b1, b8, the EP step, twice each.
set -uo pipefail
source "$(dirname "$0")/loops.sh"
plan_start
run_test_specs "40:cuda_layer_ops_test:CudaLayerOps.MoeCombineHcPostBitwise" \
  "40:cuda_experts_test:CudaExperts.MoeSublayerMatchesCpu" 50:cuda_v4_model_test 50:cuda_v4_synthetic_test
echo "tests rc=${TEST_RC:-?} ($((SECONDS - START)) s)"
ep="--synthetic v4-flash-ep8 --batch 256 --gen-len 4 --fill-state --prompt-len 4096"
f4="--synthetic v4-flash:4 --gen-len 8 --fill-state --prompt-len 4096"
export BENCH_CONFIGS="${BENCH_CONFIGS:-before-b1 $f4 --batch 1
b1 $f4 --batch 1
b1b $f4 --batch 1
before-b1b $f4 --batch 1
before-b8 $f4 --batch 8
b8 $f4 --batch 8
b8b $f4 --batch 8
before-b8b $f4 --batch 8
before-ep256c4k $ep
ep256c4k $ep
ep256c4k2 $ep
before-ep256c4k2 $ep}"
run_benches "$BIN/deepinfer" "${BENCH_S:-150}" | grep -E "rc=|^decode |^decode step parts" | cut -c1-150
plan_finish
echo "done ($((SECONDS - START)) s)"
