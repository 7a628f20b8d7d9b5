#!/usr/bin/env bash
# RAN on an H100 2026-12-06 09:41 UTC: tests passed, landed. The twenty-ninth slice, fourth call: the wide FP8 expert kernels from 1 routed row where a
# layer's experts take them (Forward::wide_experts_from; plan_twentyninth_c.sh measured
# --moe-wide-rows 1 at batch 1 / 4: device 1.215 -> 1.163 / 1.706 -> 1.504 ms). Tests, then the
# A / B against 28c0f3d's build (deepinfer-before) at batch 1, 2, 4, 8.
# Build (here): /tmp/deepinfer-before = 28c0f3d's; ninja -C build deepinfer cuda_v4_model_test
#   cuda_v4_synthetic_test cuda_v4_engine_test cuda_layer_ops_test;
#   tools/device/pack_bins.sh build/tools/deepinfer/deepinfer /tmp/deepinfer-before
#   build/tests/cuda/{cuda_v4_model_test,cuda_v4_synthetic_test,cuda_v4_engine_test,cuda_layer_ops_test}
#   run(carry=[".device-bin.tar.xz"], timeout_s=300, command="tar xJf .device-bin.tar.xz &&
#       GIT_REV=<rev> tools/device/plan_twentyninth_d.sh")
set -uo pipefail
source "$(dirname "$0")/loops.sh"
plan_start

echo "== tests"
run_test_specs 60:cuda_v4_model_test 40:cuda_v4_synthetic_test 60:cuda_v4_engine_test 60:cuda_layer_ops_test:CudaLayerOps.Moe*:CudaLayerOps.Fp8*
F4="--synthetic v4-flash:4 --gen-len 8 --fill-state --prompt-len 4096"
export BENCH_CONFIGS="${BENCH_CONFIGS:-$(ab_pairs "b1 $F4 --batch 1
b2 $F4 --batch 2
b4 $F4 --batch 4
b8 $F4 --batch 8")}"
run_benches "$BIN/deepinfer" "${BENCH_S:-90}" | grep -E "rc=|^decode |^decode step parts" | cut -c1-150
tar czf "$FINAL/runs.tgz" -C "$OUT" .
echo "tests rc=${TEST_RC:-?} ($((SECONDS - START)) s)"
