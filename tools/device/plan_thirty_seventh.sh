#!/usr/bin/env bash
# Ran once, on an H100 at 07:45 on 2026-12-07, on 25e9d31 + the patch then pending (16ac891):
# tests passed; the prefetch slower (dropped), the fused post faster (landed);
# bench/results/h100-thirty-seventh-a-prefetch-dropped.json. The prefetch is gone from the tree, so
# this plan now runs the fused post alone (its "nf" rows then equal "before").
# The thirty-seventh slice's plan (2026-12-07, session from 06:45): the decode linears (the FP8
# GEMV at 1-16 rows, the wgmma linear at 17-64) ask L2 for the rest of their weights
# (cp.async.bulk.prefetch.L2, one per weight row) before their PDL wait, so those stream while the
# kernel before them runs (the twelfth slice's GEMV had this; the thirteenth's rebuild dropped it
# and it was never measured alone in a graph).
# And up to 16 tokens the mHC post makes the next sub-layer's hc_pre chunk partials in its own
# launch (hc_post_partial_kernel; CudaTuning::hc_post_partial, `--no-hc-post-partial` turns it off).
# - tests: the FP8 linears against the CPU (both paths, 1-64 rows), the fused post against the post
#   then hc_pre (bitwise), memcheck over both, the model's GPU-vs-CPU tests, the synthetic model's
#   tests (HcPostPartialsChangeNoBits: knob on against off, bitwise);
# - the model: v4-flash-4 decode ctx 4k at batch 1 (twice), 8 and 32: the build before
#   (deepinfer-before, 25e9d31), this build without the fused post ("nf": the prefetch alone) and
#   with it, in the same call.
# Build (here): ninja -C build; tools/device/pack_bins.sh build/tools/deepinfer/deepinfer
#   build/tests/cuda/{cuda_ops_test,cuda_layer_ops_test,cuda_v4_model_test,cuda_v4_synthetic_test} DIR/deepinfer-before
#   run(carry=[".device-bin.tar.xz"], timeout_s=480, command="tar xJf .device-bin.tar.xz &&
#       tools/device/plan_thirty_seventh.sh")
set -uo pipefail
source "$(dirname "$0")/loops.sh"
plan_start
run_test_specs 60:cuda_ops_test:*Fp8* 60:cuda_layer_ops_test:*Hc*:*MoeCombine* 80:cuda_v4_model_test \
  90:cuda_v4_synthetic_test:*HcPostPartials*:*TuningChangesNoBits*:*DecodeShapeIsCaptured*:*BatchInvariant*
echo "tests rc=${TEST_RC:-?} ($((SECONDS - START)) s)"
run_sanitized "$BIN" 70 "memcheck:cuda_ops_test:CudaOps.Fp8LinearMatchesCpu:CudaOps.Fp8GroupedLinearMatchesCpu:CudaOps.Fp8WgmmaLinearMatchesCpu" \
  "memcheck:cuda_layer_ops_test:CudaLayerOps.HcPostNextPartialsBitwise"
echo "sanitizer rc=${SAN_RC:-?} ($((SECONDS - START)) s)"
f4="--synthetic v4-flash:4 --gen-len 8 --fill-state --prompt-len 4096"
nf="--no-hc-post-partial"
export BENCH_CONFIGS="before-b1 $f4 --batch 1
nf-b1 $f4 --batch 1 $nf
b1 $f4 --batch 1
before-b8 $f4 --batch 8
nf-b8 $f4 --batch 8 $nf
b8 $f4 --batch 8
before-b32 $f4 --batch 32
b32 $f4 --batch 32
before-b1b $f4 --batch 1
b1b $f4 --batch 1"
run_benches "$BIN/deepinfer" 150 | grep -E "rc=|^decode " | cut -c1-150
plan_finish
echo "done ($((SECONDS - START)) s)"
