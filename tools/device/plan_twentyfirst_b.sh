#!/usr/bin/env bash
# The twenty-first slice's second device call (written 2026-12-05 evening):
#   1. the tests over this call's kernels: the FP8 wgmma linear at 129-256 rows (one launch, two
#      halves of 128 sharing each weight tile: CudaOps.Fp8WgmmaLinearMatchesCpu), mHC pre's mid-T
#      partial (HcRowInvariance at 40 and 300 rows, HcPreAndPostMatchCpu), the router's tile by SM
#      fill (RouteRowInvariance with 32 and 256 experts), moe_rows_fp8 at 4 blocks a warp
#      (MoeRowsFp8AnyWidth, the FP8 expert tests), then the V4 model / synthetic / engine tests;
#   2. compute-sanitizer memcheck over the new rows kernel and the mHC tests;
#   3. the op bench's FP8 paths at 8-256 rows (fp8mid: the wgmma kernel now one launch at 256 rows
#      against cuBLASLt, the V4 shapes and the grouped wo_a);
#   4. deepinfer bench: the EP batch-256 step with and without (before-*: git 9694763), v4-flash-4
#      at batch 256 (its hc_pre at 256 rows too) and the 8k prefill;
#   5. with the time left, one EP batch-256 step kernel by kernel (ncu).
# Run from the repository root on the GPU machine after `tar xJf .device-bin.tar.xz`
# (tools/device/pack_bins.sh: deepinfer, deepinfer-before, the test binaries, cuda_ops_bench), with
# timeout_s 590:
#   run(carry=[".device-bin.tar.xz"], command="tar xJf .device-bin.tar.xz && GIT_REV=<rev> tools/device/plan_twentyfirst_b.sh")
set -uo pipefail
source "$(dirname "$0")/loops.sh"
plan_start

echo "== kernel tests (box ${KTESTS_S:-100} s)"
GTEST_FILTER='CudaOps.Fp8Wgmma*:CudaLayerOps.*:-CudaLayerOps.PrefillSpeed' run_tests "$BIN" "${KTESTS_S:-100}" \
  cuda_ops_test cuda_layer_ops_test
KRC=$TEST_RC
echo "== model tests (box ${TESTS_S:-120} s)"
# shellcheck disable=SC2086
run_tests "$BIN" "${TESTS_S:-120}" ${TESTS:-cuda_v4_model_test cuda_v4_synthetic_test cuda_v4_engine_test}
[ "$KRC" = 0 ] || TEST_RC=1

echo "== compute-sanitizer (box ${SAN_S:-50} s)"
run_sanitized "$BIN" "${SAN_S:-50}" "memcheck:cuda_layer_ops_test:CudaLayerOps.MoeRowsFp8AnyWidth:CudaLayerOps.HcRowInvariance" \
  "racecheck:cuda_layer_ops_test:CudaLayerOps.HcPreAndPostMatchCpu"

echo "== op bench: FP8 paths at 8-256 rows (box ${OPS_S:-60} s)"
timeout "${OPS_S:-60}" "$BIN/cuda_ops_bench" "$FINAL/ops-fp8mid.json" "${GIT_REV:-unknown}" fp8mid > "$OUT/ops-fp8mid.txt" 2>&1
echo "rc=$?"; grep -E "ceiling| (128|256) " "$OUT/ops-fp8mid.txt" | cut -c1-150 | head -30

echo "== deepinfer bench (box ${BENCH_S:-170} s)"
EP="--synthetic v4-flash-ep8 --batch 256 --prompt-len 512 --gen-len 4"
F4="--synthetic v4-flash:4"
export BENCH_CONFIGS="${BENCH_CONFIGS:-ep256 $EP
before-ep256 $EP
f4b256 $F4 --batch 256 --prompt-len 4096 --gen-len 4
before-f4b256 $F4 --batch 256 --prompt-len 4096 --gen-len 4
p8k $F4 --batch 1 --prompt-len 8192 --gen-len 4}"
run_benches "$BIN/deepinfer" "${BENCH_S:-170}"

ncu_step_table $((${TOTAL_S:-565} - (SECONDS - START))) "$EP" 42
plan_finish
echo "tests rc=${TEST_RC:-?} sanitizer rc=${SAN_RC:-?}"
