#!/usr/bin/env bash
# The forty-second slice's second call. What the first call (plan_forty_second.sh, H200) kept: the
# GEMV for decode's few-row bf16 linears, now also the head at one row (the first call's b1h:
# -3%; at 8 rows the head was 12% slower on it, so not there), and the hash-routed layers' direct
# route (-1.5% / -1.2% at batch 1 / 8). The embedding written into mHC's streams and the greedy
# sampler's loads together were neutral there and are not in this build. Here: tests, then this
# build (GIT_REV) against 036d8af (deepinfer-before) at batch 1, 2, 8 and the EP step (two of each
# but the EP), batch 2 with the head on the GEMV too, then the issue's matrix with its transformers
# peer (plan_matrix.sh, BENCH_S / PEER_S).
# Build here: deepinfer-before = 036d8af in /tmp/before; ninja; tools/device/pack_bins.sh build/tools/deepinfer/deepinfer
#   build/tests/cuda/{cuda_model_ops_test,cuda_layer_ops_test,cuda_v4_model_test,cuda_v4_synthetic_test,cuda_v4_engine_test}
#   /tmp/before/deepinfer-before; run(carry=[".device-bin.tar.xz"], timeout_s=590,
#   command="tar xJf .device-bin.tar.xz && GIT_REV=<rev> tools/device/plan_forty_second_b.sh")
set -uo pipefail
source "$(dirname "$0")/loops.sh"
plan_start
run_test_specs "20:cuda_model_ops_test:*Bf16*" "20:cuda_layer_ops_test:*Route*" 60:cuda_v4_model_test \
  25:cuda_v4_synthetic_test 80:cuda_v4_engine_test
echo "tests rc=${TEST_RC:-?} ($((SECONDS - START)) s)"
f4="--synthetic v4-flash:4 --gen-len 8 --fill-state --prompt-len 4096"
export BENCH_CONFIGS="$(decode_ab_configs "b1 b2 b8 ep256 b1b b2b b8b")
b2h $f4 --batch 2 --bf16-gemv-max-n 200000
b4 $f4 --batch 4
before-b4 $f4 --batch 4"
ab_then_matrix 120 "${BENCH_S:-200}" "${PEER_S:-200}"
echo "done ($((SECONDS - START)) s)"
