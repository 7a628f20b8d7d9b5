#!/usr/bin/env bash
# RAN on an H100 on 2026-12-06: tests passed (layer ops Hc* / Moe* 7, V4 model 6, synthetic 9,
# engine 6; memcheck clean); the loads ahead gained nothing (device ms before -> after: b1 1.166 ->
# 1.170, b32 3.502 -> 3.515, b128 5.759 -> 5.738, EP b256 28.34 -> 28.49; 1k prefill 98.0k -> 97.0k
# tok/s), so they were removed and the move alone landed (bench/results/h100-thirtieth-finish-ahead-dropped.json).
# The mHC code out of layer_ops.cu into mhc.cu (a move: the same kernels; the MoE combine's float4
# arithmetic in moe_combine.cuh, shared), and hc_finish_kernel<*, kPack> issuing X's loads of
# column blocks 1..3 with block 0's (they were a round trip each, in turn, after the Sinkhorn;
# 42 -> 106 registers). Tests: the mHC ops (bitwise pack / comb-later / row invariance), V4 model,
# synthetic, engine; memcheck on HcPreNormPackBitwise (no shared-memory change). A / B (trimmed to
# fit the device time left): batch 1, 32, 128, the EP step and a 1k-token prefill (hc_finish's
# pack path at 1 to 1,024 tokens) against deepinfer-before (the commit before).
# Build (here): ninja -C build deepinfer cuda_layer_ops_test cuda_v4_model_test cuda_v4_synthetic_test
#   cuda_v4_engine_test; tools/device/pack_bins.sh build/tools/deepinfer/deepinfer /tmp/deepinfer-before
#   build/tests/cuda/{cuda_layer_ops_test,cuda_v4_model_test,cuda_v4_synthetic_test,cuda_v4_engine_test}
#   run(carry=[".device-bin.tar.xz"], timeout_s=400, command="tar xJf .device-bin.tar.xz &&
#       GIT_REV=<rev> tools/device/plan_thirtieth_d.sh")
set -uo pipefail
source "$(dirname "$0")/loops.sh"
plan_start

echo "== tests"
run_test_specs 90:cuda_layer_ops_test:CudaLayerOps.Hc*:CudaLayerOps.Moe* 60:cuda_v4_model_test 50:cuda_v4_synthetic_test 100:cuda_v4_engine_test
run_sanitized "$BIN" 40 "memcheck:cuda_layer_ops_test:CudaLayerOps.HcPreNormPackBitwise"
f4="--synthetic v4-flash:4" dec="--gen-len 8 --fill-state --prompt-len 4096"
export BENCH_CONFIGS="${BENCH_CONFIGS:-$(ab_pairs "b1 $f4 $dec --batch 1
b32 $f4 $dec --batch 32
b128 $f4 $dec --batch 128
ep256c4k --synthetic v4-flash-ep8 --batch 256 --gen-len 4 --fill-state --prompt-len 4096
p1k $f4 --batch 1 --prompt-len 1024 --gen-len 2")}"
run_benches "$BIN/deepinfer" "${BENCH_S:-150}" | grep -E "rc=|^decode |^prefill |^decode step parts" | cut -c1-150
tar czf "$FINAL/runs.tgz" -C "$OUT" .
echo "tests rc=${TEST_RC:-?} ($((SECONDS - START)) s)"
