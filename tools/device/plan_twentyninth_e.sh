#!/usr/bin/env bash
# RAN on an H100 2026-12-06 09:48 UTC: tests passed, landed. The twenty-ninth slice, fifth call: hash layers route from the router's logits alone (moe_route /
# moe_route_gemm with experts and weights null; the top-k kernel they ran, whose experts and
# weights hash_route overwrote, no longer runs). Tests, the A / B against 12ba38d's build
# (deepinfer-before) at batch 1 / 4 and the EP step; then Nsight Compute's sections for the FP8
# expert kernel at the batch-1 shape (cuda_ops_bench moe:6:1), which now runs the b1 experts.
# Build (here): /tmp/deepinfer-before = 12ba38d's; ninja -C build deepinfer cuda_ops_bench
#   cuda_layer_ops_test cuda_v4_model_test cuda_v4_synthetic_test cuda_v4_engine_test;
#   tools/device/pack_bins.sh build/tools/deepinfer/deepinfer /tmp/deepinfer-before
#   build/tests/cuda/{cuda_ops_bench,cuda_layer_ops_test,cuda_v4_model_test,cuda_v4_synthetic_test,cuda_v4_engine_test}
#   run(carry=[".device-bin.tar.xz"], timeout_s=360, command="tar xJf .device-bin.tar.xz &&
#       GIT_REV=<rev> tools/device/plan_twentyninth_e.sh")
set -uo pipefail
source "$(dirname "$0")/loops.sh"
plan_start

echo "== tests"
run_test_specs 60:cuda_layer_ops_test:CudaLayerOps.Route*:CudaLayerOps.Moe* 60:cuda_v4_model_test 40:cuda_v4_synthetic_test 60:cuda_v4_engine_test
grep -E "routing:" "$OUT/test-cuda_layer_ops_test.txt" | head -2
F4="--synthetic v4-flash:4 --gen-len 8 --fill-state --prompt-len 4096"
export BENCH_CONFIGS="${BENCH_CONFIGS:-$(ab_pairs "b1 $F4 --batch 1
b4 $F4 --batch 4
ep256c4k --synthetic v4-flash-ep8 --batch 256 --gen-len 4 --fill-state --prompt-len 4096")}"
run_benches "$BIN/deepinfer" "${BENCH_S:-100}" | grep -E "rc=|^decode |^decode step parts" | cut -c1-150
echo "== ncu sections: mxfp4_fp8_kernel in moe:6:1"
OUT="$OUT" KERNEL_S=90 KERNEL_ARGS="mxfp4_fp8_kernel moe:6:1" tools/device/run_ncu.sh 2>&1 | head -75
tar czf "$FINAL/runs.tgz" -C "$OUT" .
echo "tests rc=${TEST_RC:-?} ($((SECONDS - START)) s)"
