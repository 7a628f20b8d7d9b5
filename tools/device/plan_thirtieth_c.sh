#!/usr/bin/env bash
# RAN on an H100 on 2026-12-06 and DROPPED: correct (bitwise, tests and sanitizers passed) but slower
# (EP b256 device 28.48 -> 29.04 ms, 8k prefill 155.6k -> 144.4k tok/s); the code was removed
# (bench/results/h100-thirtieth-hc-post-next-dropped.json, docs/performance.md's thirtieth slice).
# The mHC post and the next sub-layer's hc_pre partial sums in one pass from 128 tokens
# (dc::hc_post_next: hc_partial_prefill_kernel<2, true> makes each chunk's stream of the new X from
# X's four streams and f, writes it to the other X buffer and feeds it to the dots; Forward::post_to,
# a.X / a.X2 swapped): one launch and one read of X less a sub-layer (the EP step's
# hc_partial_prefill 13.7 us x 87, the 8k prefill's 246 us x 8). Bitwise: HcPostNextPartialsBitwise
# (X, the partials, pre / post / comb / input at 1, 5, 128, 300, 1,100 tokens); racecheck / memcheck.
# A / B: step_ab_configs against the build before (deepinfer-before; b1-b32 keep the in-place post).
# (A first version, in place with one 512-column run of all four streams a block, ran on an H100
# the same day: bitwise, but 640-680 us a call at 256 tokens, fn's loads one round trip each behind
# a per-row branch, and a quarter of the blocks; b1 2.09 against 1.17 ms: replaced before landing.)
# Build (here): ninja -C build deepinfer cuda_layer_ops_test cuda_v4_model_test cuda_v4_synthetic_test
#   cuda_v4_engine_test; the before binary from the commit before in /tmp/deepinfer-before;
#   tools/device/pack_bins.sh build/tools/deepinfer/deepinfer /tmp/deepinfer-before
#   build/tests/cuda/{cuda_layer_ops_test,cuda_v4_model_test,cuda_v4_synthetic_test,cuda_v4_engine_test}
#   run(carry=[".device-bin.tar.xz"], timeout_s=500, command="tar xJf .device-bin.tar.xz &&
#       GIT_REV=<rev> tools/device/plan_thirtieth_c.sh")
set -uo pipefail
source "$(dirname "$0")/loops.sh"
plan_start

echo "== tests"
run_test_specs 90:cuda_layer_ops_test:CudaLayerOps.Hc* 60:cuda_v4_model_test 50:cuda_v4_synthetic_test 100:cuda_v4_engine_test
run_sanitized "$BIN" 120 "racecheck:cuda_layer_ops_test:CudaLayerOps.HcPostNextPartialsBitwise" \
  "memcheck:cuda_layer_ops_test:CudaLayerOps.HcPostNextPartialsBitwise"
export BENCH_CONFIGS="${BENCH_CONFIGS:-$(step_ab_configs)}"
run_benches "$BIN/deepinfer" "${BENCH_S:-120}" | grep -E "rc=|^decode |^prefill |^decode step parts" | cut -c1-150
tar czf "$FINAL/runs.tgz" -C "$OUT" .
echo "tests rc=${TEST_RC:-?} ($((SECONDS - START)) s)"
[ "${NCU:-1}" = 1 ] && ncu_step_by_name 150 "--synthetic v4-flash-ep8 --batch 256 --gen-len 2 --fill-state --prompt-len 4096" | tail -45
[ -d "$OUT/step" ] && tar czf "$FINAL/profiles.tgz" -C "$OUT" step
echo "done ($((SECONDS - START)) s)"
