#!/usr/bin/env bash
# The twenty-third slice's second device call (2026-12-05, 18:04 UTC session), on 72f19f3 + :
#   1. hc_finish's Sinkhorn in blocks of its own (grid T x (1 + d/1024)): the collapse blocks no
#      longer wait for it (Nsight: 58 of hc_finish's 81 stall cycles an instruction at barriers).
#   2. The FP8 expert kernels' x scales stored so that accumulator lane t reads its N / 4 as float4s
#      (xs_pos; 4 loads instead of 8 a chunk at 64 rows, no per-load address), and one mask for
#      both halves of a weight word's selectors. Same math, same order.
# Tests: the mHC and expert tests (bitwise row invariance, CPU parity), V4 model / synthetic /
# engine; memcheck and racecheck over both. Then the op bench moe:32:48 with 72f19f3's, Nsight's
# instruction counts, the EP step with and without (before-*), the EP step with the grouped wo_a on
# cuBLASLt's timed plans (--fp8-wgmma-rows -1: grouped_out_lt, now with splits of K) and the
# issue's other rows on this build (v4-flash-4 batch 1 / 32 at context 4096, the 8k prefill).
# Build (here): 72f19f3's deepinfer and cuda_ops_bench as /tmp/deepinfer-before, /tmp/cuda_ops_bench-before;
#   T=build/tests/cuda; tools/device/pack_bins.sh build/tools/deepinfer/deepinfer /tmp/deepinfer-before \
#     $T/cuda_layer_ops_test $T/cuda_v4_model_test $T/cuda_v4_synthetic_test $T/cuda_v4_engine_test \
#     $T/cuda_ops_bench /tmp/cuda_ops_bench-before
#   run(carry=[".device-bin.tar.xz"], command="tar xJf .device-bin.tar.xz && GIT_REV=<rev> tools/device/plan_twentythird_b.sh")
set -uo pipefail
source "$(dirname "$0")/loops.sh"
plan_start

echo "== tests"
K='CudaLayerOps.Hc*:CudaLayerOps.Fp8Experts*:CudaLayerOps.Moe*:CudaLayerOps.WideExperts*'
GTEST_FILTER="$K" run_tests "$BIN" 60 cuda_layer_ops_test
KRC=$TEST_RC
run_tests "$BIN" "${TESTS_S:-130}" cuda_v4_model_test cuda_v4_synthetic_test cuda_v4_engine_test
[ "$KRC" = 0 ] || TEST_RC=1
run_sanitized "$BIN" 60 "memcheck:cuda_layer_ops_test:CudaLayerOps.Hc*:CudaLayerOps.Fp8Experts*" \
  "racecheck:cuda_layer_ops_test:CudaLayerOps.Hc*:CudaLayerOps.Fp8Experts*"

echo "== op bench"
ops_ab moe:32:48 fp8
ncu_ab mxfp4_fp8_kernel gpu__time_duration.sum,smsp__inst_executed.sum,smsp__issue_active.avg.pct_of_peak_sustained_active moe:32:48

echo "== deepinfer bench (box ${BENCH_S:-230} s)"
EP="--synthetic v4-flash-ep8 --batch 256 --prompt-len 512 --gen-len 4"
F4="--synthetic v4-flash:4"
export BENCH_CONFIGS="${BENCH_CONFIGS:-ep256 $EP
before-ep256 $EP
ep256nowg $EP --fp8-wgmma-rows -1
b1 $F4 --batch 1 --prompt-len 4096 --gen-len 32
b32 $F4 --batch 32 --prompt-len 4096 --gen-len 16
p8k $F4 --batch 1 --prompt-len 8192 --gen-len 4}"
run_benches "$BIN/deepinfer" "${BENCH_S:-230}"
plan_finish
echo "tests rc=${TEST_RC:-?} sanitizer rc=${SAN_RC:-?} ($((SECONDS - START)) s)"
