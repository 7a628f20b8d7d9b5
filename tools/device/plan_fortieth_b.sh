#!/usr/bin/env bash
# The fortieth slice's plan, second form (written 2026-12-07 ~13:10 UTC on 387bd71): two changes, run
# together, each measured against the build before it in the same call:
# - mid: tools/device/pending/fortieth-swiglu-rows-in-w13.patch (w2's e4m3 rows from w13's launch);
# - this tree: that patch plus wo_b's e4m3 input from wo_a's grouped wgmma launch (fp8_wgmma.cu's
#   epilogue: each block's 128 weight rows are one scale block of y's row; the column maxima of a
#   split tile exchanged over DSMEM), no quantisation launch between wo_a and wo_b at <= 64 rows.
# Tests: the FP8 experts, the wgmma linear (CPU parity; the fused rows bitwise quantize_act_fp8's),
# model / synthetic / engine; racecheck and memcheck over both new paths. A/B: before (387bd71),
# mid, this tree at batch 1 (twice), 8, and the EP step.
# Build here: deepinfer at 387bd71 -> /tmp/before/deepinfer-before; + the patch -> deepinfer-mid;
#   this tree: ninja -C build; tools/device/pack_bins.sh build/tools/deepinfer/deepinfer
#   build/tests/cuda/{cuda_experts_test,cuda_ops_test,cuda_v4_model_test,cuda_v4_synthetic_test,cuda_v4_engine_test}
#   /tmp/before/deepinfer-before /tmp/before/deepinfer-mid
set -uo pipefail
source "$(dirname "$0")/loops.sh"
plan_start
run_test_specs 150:cuda_experts_test "60:cuda_ops_test:CudaOps.Fp8Wgmma*:CudaOps.Quantize*" 80:cuda_v4_model_test \
  90:cuda_v4_synthetic_test 80:cuda_v4_engine_test
echo "tests rc=${TEST_RC:-?} ($((SECONDS - START)) s)"
run_sanitized "$BIN" 150 "racecheck:cuda_experts_test:CudaExperts.Fp8ExpertsMatchCpuReferenceRounding" \
  "memcheck:cuda_experts_test:CudaExperts.Fp8ExpertsMatchCpuReferenceRounding" \
  "racecheck:cuda_ops_test:CudaOps.Fp8WgmmaGroupedWritesNextInputBitwise" \
  "memcheck:cuda_ops_test:CudaOps.Fp8WgmmaGroupedWritesNextInputBitwise"
echo "sanitizers rc=${SAN_RC:-?} ($((SECONDS - START)) s)"
export BENCH_CONFIGS="$(decode_ab_configs "b1 b8 ep256 b1b b4" "mid before")"
run_benches "$BIN/deepinfer" 220 | grep -E "rc=[1-9]" | cut -c1-150
bench_device_ms
plan_finish
echo "done ($((SECONDS - START)) s)"
