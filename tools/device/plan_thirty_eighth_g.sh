#!/usr/bin/env bash
# The thirty-eighth slice's seventh plan (2026-12-07, written and run the same session; ran on an H100
# at ~09:44 UTC: tests passed; device ms b1 1.071 / 1.074 -> 1.070 / 1.063, b8 1.782 -> 1.773, landed;
# the matrix and the peer ran, but m/ did not come back (at most 8 files a call): the matrix file
# is transcribed from the printed table, bench/results/matrix-h100-thirty-eighth.json):
# 1. the mHC finish kernels load their weights (base / scale; the pack's norm weight of its
#    columns) before the PDL wait (deepinfer-wpre and the test binaries; same bits): the mHC tests
#    and the model / synthetic tests, then A/B against HEAD (deepinfer) at batch 1 (twice) and 8;
# 2. the issue's matrix on HEAD (deepinfer; plan_matrix.sh, its results in m/) with the
#    transformers peer in the same call (PEER_S 200);
# 3. batch 8's step kernel by kernel (ncu, HEAD).
# Build (here): deepinfer = HEAD's build, deepinfer-wpre and the tests = the change's;
#   run(carry=[".device-bin.tar.xz"], timeout_s=590, command="tar xJf .device-bin.tar.xz &&
#   GIT_REV=<HEAD> tools/device/plan_thirty_eighth_g.sh")
set -uo pipefail
source "$(dirname "$0")/loops.sh"
plan_start
run_test_specs "60:cuda_layer_ops_test:CudaLayerOps.Hc*" 80:cuda_v4_model_test 90:cuda_v4_synthetic_test
echo "tests rc=${TEST_RC:-?} ($((SECONDS - START)) s)"
f4="--synthetic v4-flash:4 --gen-len 8 --fill-state --prompt-len 4096"
export BENCH_CONFIGS="b1 $f4 --batch 1
wpre-b1 $f4 --batch 1
b8 $f4 --batch 8
wpre-b8 $f4 --batch 8
b1b $f4 --batch 1
wpre-b1b $f4 --batch 1"
run_benches "$BIN/deepinfer" 60 | grep -E "rc=|^decode " | cut -c1-150
bench_device_ms
plan_finish
unset BENCH_CONFIGS
echo "== the matrix on HEAD ($((SECONDS - START)) s)"
OUT="$FINAL/m" BENCH_S=150 PEER_S=200 MACHINE="$(nvidia-smi --query-gpu=name --format=csv,noheader | head -1)" \
  tools/device/plan_matrix.sh 2>&1 | tail -60
OUT=/tmp/ncu-out && rm -rf "$OUT" && mkdir -p "$OUT"
ncu_step_table $((560 - (SECONDS - START))) "--synthetic v4-flash:4 --batch 8 --prompt-len 4096 --fill-state --gen-len 8" 40
cp "$OUT/ncu-times.txt" "$FINAL/ncu-step-f4b8.txt" 2>/dev/null
echo "done ($((SECONDS - START)) s)"
