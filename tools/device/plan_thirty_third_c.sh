#!/usr/bin/env bash
# The thirty-third slice's third call (2026-12-06, on a0df9be): the FP8 experts' rows in bf16, as
# the reference rounds them: w2's (mxfp4_experts_w2_fp8's y16, in yp's memory; 1,536 x 4,096 x 4 B
# = 25 MB written and read back a layer at the EP step, now half) read by the MoE combine + mHC post
# (moe_combine_hc_post's y_perm16), and the SwiGLU's (the w13 step's a16, 12.6 MB) read by
# moe_rows_fp8_bf16. Carried: deepinfer-before (a0df9be) only (the carry limit: no y16-only build, no
# 7d32178 build for the rows change at b8 / b1). Tests:
# experts (w2's / w13's bf16 rows == the fp32 rows rounded once; rows_fp8 from bf16 == from fp32),
# layer ops (MoeCombineHcPostBitwise: bf16 rows == fp32 rows of the same values), V4 model,
# synthetic, engine; memcheck over both.
set -uo pipefail
source "$(dirname "$0")/loops.sh"
plan_start
run_test_specs "60:cuda_experts_test:CudaExperts.Fp8*:CudaExperts.Moe*" \
  "40:cuda_layer_ops_test:CudaLayerOps.MoeCombineHcPostBitwise" 60:cuda_v4_model_test 60:cuda_v4_synthetic_test \
  90:cuda_v4_engine_test
run_sanitized "$BIN" 60 "memcheck:cuda_experts_test:CudaExperts.Fp8ExpertsMatchCpuReferenceRounding" \
  "memcheck:cuda_layer_ops_test:CudaLayerOps.MoeCombineHcPostBitwise"
echo "tests rc=${TEST_RC:-?} san rc=${SAN_RC:-?} ($((SECONDS - START)) s)"
ep="--synthetic v4-flash-ep8 --batch 256 --gen-len 4 --fill-state --prompt-len 4096"
f4="--synthetic v4-flash:4 --gen-len 8 --fill-state --prompt-len 4096"
p8k="--synthetic v4-flash:4 --batch 1 --prompt-len 8192 --gen-len 2"
export BENCH_CONFIGS="${BENCH_CONFIGS:-before-ep256c4k $ep
ep256c4k $ep
before-p8k $p8k
p8k $p8k
before-b8 $f4 --batch 8
b8 $f4 --batch 8
b1 $f4 --batch 1
ep256c4k2 $ep
before-ep256c4k2 $ep}"
run_benches "$BIN/deepinfer" "${BENCH_S:-230}" | grep -E "rc=|^decode |^prefill |^decode step parts" | cut -c1-150
plan_finish
echo "done ($((SECONDS - START)) s)"
