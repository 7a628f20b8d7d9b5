#!/usr/bin/env bash
# The forty-third slice's second call. What the first call (plan_forty_third.sh, H100) kept: the
# final norm in the head's hc_pre launch (-0.5% at batch 1 and 8), the decode attention's merge
# writing wo_a's e4m3 input (-0.9% / -1.1% / -0.3% at batch 1 / 2 / 8), the head on the GEMV up to
# 4 rows (its b4h: -2%). Dropped: the GEMV's two columns a warp (batch 8 +1.4%). Here: tests, then
# this build (GIT_REV) against 655aecd (deepinfer-before) at batch 1, 2, 4, 8 and the EP step (two
# of batch 1 and 8), then the issue's matrix with its transformers peer (plan_matrix.sh, BENCH_S /
# PEER_S, emptied BENCH_CONFIGS).
# Build here: deepinfer-before = 655aecd in /tmp/before; ninja; tools/device/pack_bins.sh build/tools/deepinfer/deepinfer
#   build/tests/cuda/{cuda_attn_lt_test,cuda_model_ops_test,cuda_v4_model_test,cuda_v4_synthetic_test,cuda_v4_engine_test}
#   /tmp/before/deepinfer-before; run(carry=[".device-bin.tar.xz"], timeout_s=590,
#   command="tar xJf .device-bin.tar.xz && GIT_REV=<rev> tools/device/plan_forty_third_b.sh")
set -uo pipefail
source "$(dirname "$0")/loops.sh"
plan_start
run_test_specs "20:cuda_attn_lt_test:*Quantised*:*HeadsPerBlock*:*DecodeMatches*:*BatchInvariant*" \
  "20:cuda_model_ops_test:*Bf16*" 60:cuda_v4_model_test 25:cuda_v4_synthetic_test 80:cuda_v4_engine_test
echo "tests rc=${TEST_RC:-?} ($((SECONDS - START)) s)"
export BENCH_CONFIGS="$(decode_ab_configs "b1 b2 b4 b8 ep256 b1b b8b")"
ab_then_matrix 100 "${BENCH_S:-190}" "${PEER_S:-150}"
echo "done ($((SECONDS - START)) s)"
