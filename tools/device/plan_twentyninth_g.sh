#!/usr/bin/env bash
# RAN on an H100 2026-12-06 10:13 UTC: tests passed, landed. The twenty-ninth slice, seventh call: the shared expert's w1 and w3 as one linear ([2 I, d],
# concat_rows at load; one GEMM into [gate | up] rows, the SwiGLU reading both halves): one launch
# less a layer at small batches, and at the EP step one cuBLASLt GEMM of twice the output tiles
# instead of two half-filled ones. Tests (the synthetic round trip writes sh_w13 back as w1 / w3
# and reloads it), then the A / B against d7bf332's build (deepinfer-before).
# Build (here): /tmp/deepinfer-before = d7bf332's; ninja -C build deepinfer cuda_v4_model_test
#   cuda_v4_synthetic_test cuda_v4_engine_test;
#   tools/device/pack_bins.sh build/tools/deepinfer/deepinfer /tmp/deepinfer-before
#   build/tests/cuda/{cuda_v4_model_test,cuda_v4_synthetic_test,cuda_v4_engine_test}
#   run(carry=[".device-bin.tar.xz"], timeout_s=360, command="tar xJf .device-bin.tar.xz &&
#       GIT_REV=<rev> tools/device/plan_twentyninth_g.sh")
set -uo pipefail
source "$(dirname "$0")/loops.sh"
plan_start

echo "== tests"
run_test_specs 60:cuda_v4_model_test 50:cuda_v4_synthetic_test 100:cuda_v4_engine_test
export BENCH_CONFIGS="${BENCH_CONFIGS:-$(step_ab_configs)}"
run_benches "$BIN/deepinfer" "${BENCH_S:-120}" | grep -E "rc=|^decode |^prefill |^decode step parts" | cut -c1-150
tar czf "$FINAL/runs.tgz" -C "$OUT" .
echo "tests rc=${TEST_RC:-?} ($((SECONDS - START)) s)"
