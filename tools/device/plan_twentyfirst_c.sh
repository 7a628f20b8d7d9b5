#!/usr/bin/env bash
# The twenty-first slice's third device call (written 2026-12-05 evening):
#   1. tests: the activation quantisation at 4 blocks a warp (QuantizeActivationMatchesHost at K
#      4096 and 384, the norm packing, the FP8 linears), mHC pre's partial at 2 tokens a thread below
#      1,024 tokens (HcRowInvariance, HcPreAndPostMatchCpu), the MoE tests, then the V4 model /
#      synthetic / engine tests;
#   2. deepinfer bench: the EP batch-256 step and the 8k prefill with and without (before-*: git
#      e7429a7, the second call's build);
#   3. with the time left, one EP batch-256 step kernel by kernel (ncu).
# Run after `tar xJf .device-bin.tar.xz` (deepinfer, deepinfer-before, the test binaries):
#   run(carry=[".device-bin.tar.xz"], command="tar xJf .device-bin.tar.xz && GIT_REV=<rev> tools/device/plan_twentyfirst_c.sh")
set -uo pipefail
source "$(dirname "$0")/loops.sh"
plan_start

echo "== kernel tests (box ${KTESTS_S:-90} s)"
GTEST_FILTER='CudaOps.Quantize*:CudaOps.RmsNorm*:CudaOps.Fp8*:CudaLayerOps.*:-CudaLayerOps.PrefillSpeed' \
  run_tests "$BIN" "${KTESTS_S:-90}" cuda_ops_test cuda_layer_ops_test
KRC=$TEST_RC
echo "== model tests (box ${TESTS_S:-110} s)"
# shellcheck disable=SC2086
run_tests "$BIN" "${TESTS_S:-110}" ${TESTS:-cuda_v4_model_test cuda_v4_synthetic_test cuda_v4_engine_test}
[ "$KRC" = 0 ] || TEST_RC=1

echo "== deepinfer bench (box ${BENCH_S:-130} s)"
EP="--synthetic v4-flash-ep8 --batch 256 --prompt-len 512 --gen-len 4"
F4="--synthetic v4-flash:4"
export BENCH_CONFIGS="${BENCH_CONFIGS:-ep256 $EP
before-ep256 $EP
p8k $F4 --batch 1 --prompt-len 8192 --gen-len 4
before-p8k $F4 --batch 1 --prompt-len 8192 --gen-len 4}"
run_benches "$BIN/deepinfer" "${BENCH_S:-130}"

ncu_step_table $((${TOTAL_S:-430} - (SECONDS - START))) "$EP" 30
plan_finish
echo "tests rc=${TEST_RC:-?}"
