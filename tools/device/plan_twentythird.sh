#!/usr/bin/env bash
# The twenty-third slice's first device call (2026-12-05, 18:04 UTC session):
#   1. The FP8 expert kernels' copies (mxfp4_fp8.cu, Copier): sources and ring stage advanced a
#      chunk at a time instead of recomputed from the chunk index (Nsight on the last call: 62 of
#      the 262 instructions a warp issued per chunk were the copies' address arithmetic; the kernel
#      issues on 52% of cycles, latency and issue bound). Same math in the same order.
#   2. cuBLASLt's timed FP8 plans (lt_plan.cuh, lt_with_splits) also try each candidate split 2-8
#      ways along K (workspace reduction): the EP step's six 256-row GEMMs ran 8-66 CTAs.
# Tests: the expert kernels (CPU parity, tiled = plain bitwise), cuBLASLt parity incl. the timed
# plan, V4 model / synthetic / engine; compute-sanitizer over the expert test. Then the op bench
# (moe:32:48 with the build before; the six dense shapes at 256 rows: first / timed plan and its
# configuration), the EP batch-256 step with and without (before-*), instruction counts by ncu.
# Build (here): before-binaries of 23e683a as /tmp/deepinfer-before, /tmp/cuda_ops_bench-before;
#   T=build/tests/cuda; tools/device/pack_bins.sh build/tools/deepinfer/deepinfer /tmp/deepinfer-before \
#     $T/cuda_layer_ops_test $T/cuda_attn_lt_test $T/cuda_v4_model_test $T/cuda_v4_synthetic_test \
#     $T/cuda_v4_engine_test $T/cuda_ops_bench /tmp/cuda_ops_bench-before
#   run(carry=[".device-bin.tar.xz"], command="tar xJf .device-bin.tar.xz && GIT_REV=<rev> tools/device/plan_twentythird.sh")
set -uo pipefail
source "$(dirname "$0")/loops.sh"
plan_start

echo "== tests"
GTEST_FILTER='CudaLayerOps.Fp8Experts*:CudaLayerOps.Moe*:CudaLayerOps.WideExperts*' run_tests "$BIN" 60 cuda_layer_ops_test
KRC=$TEST_RC
GTEST_FILTER='CudaLt.*' run_tests "$BIN" 40 cuda_attn_lt_test
[ "$TEST_RC" = 0 ] || KRC=1
run_tests "$BIN" "${TESTS_S:-130}" cuda_v4_model_test cuda_v4_synthetic_test cuda_v4_engine_test
[ "$KRC" = 0 ] || TEST_RC=1
run_sanitized "$BIN" 60 "memcheck:cuda_layer_ops_test:CudaLayerOps.Fp8Experts*" \
  "racecheck:cuda_layer_ops_test:CudaLayerOps.Fp8Experts*"

echo "== op bench"
ops_ab moe:32:48 "fp8|mxfp4" 8
for s in 1024:4096 512:4096 4096:8192 32768:1024 2048:4096 4096:2048; do
  timeout 40 "$BIN/cuda_ops_bench" "$OUT/ops-lt-$s.json" x "fp8paths:$s:1:256" > "$OUT/ops-lt-${s/:/x}.txt" 2>&1
  echo "fp8paths $s M=256 rc=$?"; grep -E "cublaslt|wgmma" "$OUT/ops-lt-${s/:/x}.txt" | cut -c1-160
done

echo "== deepinfer bench (box ${BENCH_S:-100} s)"
EP="--synthetic v4-flash-ep8 --batch 256 --prompt-len 512 --gen-len 4"
export BENCH_CONFIGS="${BENCH_CONFIGS:-ep256 $EP
before-ep256 $EP}"
run_benches "$BIN/deepinfer" "${BENCH_S:-100}"

if [ $((SECONDS - START)) -lt 480 ]; then
  echo "== ncu: the expert kernels' instructions, before and after"
  ncu_ab mxfp4_fp8_kernel gpu__time_duration.sum,smsp__inst_executed.sum,smsp__issue_active.avg.pct_of_peak_sustained_active,dram__throughput.avg.pct_of_peak_sustained_elapsed moe:32:48
fi
plan_finish
cp "$OUT"/ops-moe-*.json "$FINAL/" 2>/dev/null
echo "tests rc=${TEST_RC:-?} sanitizer rc=${SAN_RC:-?} ($((SECONDS - START)) s)"
