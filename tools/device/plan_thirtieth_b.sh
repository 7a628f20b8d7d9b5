#!/usr/bin/env bash
# RAN on an H100 on 2026-12-06 (the thirtieth slice's first call; landed as 355e212: tests and
# sanitizers passed, EP b256 device 28.88 -> 28.37 ms). Written as
# tools/device/pending/thirtieth-hc-pre-norm.patch on ab4fca8; compiled, no spills: hc_finish<*, pack> 42-44
# registers). The mHC pre and the sub-layer's norm in one launch: below 1,025 tokens
# hc_finish_kernel<part, kPack> (grid T x 1: the token's 1024-column blocks in turn, then
# detail::norm_pack_row on the input row it wrote, rms_norm_pack's code moved to norm_row.cuh), so
# each sub-layer loses the rms_norm_pack launch (2 a layer; the b1 step has ~5 us each, the EP
# step 130 x 6 us). Bitwise: the same functions on the same data (HcPreNormPackBitwise: pre, post,
# comb, input, y, e4m3, both scale layouts, bf16 at 1 / 7 (comb on the side) / 300 / 1,100 tokens).
# Build (here, from a clean tree): ninja -C build deepinfer; cp build/tools/deepinfer/deepinfer
#   /tmp/deepinfer-before; git apply tools/device/pending/thirtieth-hc-pre-norm.patch; ninja -C build
#   deepinfer cuda_layer_ops_test cuda_v4_model_test cuda_v4_synthetic_test cuda_v4_engine_test;
#   tools/device/pack_bins.sh build/tools/deepinfer/deepinfer /tmp/deepinfer-before
#   build/tests/cuda/{cuda_layer_ops_test,cuda_v4_model_test,cuda_v4_synthetic_test,cuda_v4_engine_test}
#   run(carry=[".device-bin.tar.xz"], timeout_s=400, command="tar xJf .device-bin.tar.xz &&
#       GIT_REV=<rev> tools/device/plan_thirtieth_b.sh")
set -uo pipefail
source "$(dirname "$0")/loops.sh"
plan_start

echo "== tests"
run_test_specs 60:cuda_layer_ops_test:CudaLayerOps.Hc* 60:cuda_v4_model_test 50:cuda_v4_synthetic_test 100:cuda_v4_engine_test
run_sanitized "$BIN" 60 "racecheck:cuda_layer_ops_test:CudaLayerOps.HcPreNormPackBitwise" \
  "memcheck:cuda_layer_ops_test:CudaLayerOps.HcPreNormPackBitwise"
export BENCH_CONFIGS="${BENCH_CONFIGS:-$(step_ab_configs)}"
run_benches "$BIN/deepinfer" "${BENCH_S:-120}" | grep -E "rc=|^decode |^prefill |^decode step parts" | cut -c1-150
tar czf "$FINAL/runs.tgz" -C "$OUT" .
echo "tests rc=${TEST_RC:-?} ($((SECONDS - START)) s)"
