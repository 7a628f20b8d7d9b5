#!/usr/bin/env bash
# RAN on an H100 on 2026-12-06 (part 1, with OPS_SUFFIX=-before and no model rows: the knob's model
# rows ran in plan_thirty_first_b.sh's call; logs bench/results/logs/thirty-first-h100-ncu-*).
# (Written 2026-12-06 on the thirtieth slice's last commit; no CUDA code, host only: the
# knob it measures, CudaTuning::fp8_wgmma_max_rows / `--fp8-wgmma-max-rows`, landed with it).
# Question: at 129-256 rows (the EP step's 256, decode batches 128-256), is the wgmma decode linear
# (fp8_linear_wgmma: weights as wgmma's M, the batch as its N in two halves of 128 sharing each
# weight stage, K split over a cluster where the tiles leave SMs idle; tested against the CPU at
# 1-256 rows in cuda_ops_test) faster than cuBLASLt's timed plan, which the model uses there? The
# thirtieth slice's EP profile has the cuBLASLt FP8 GEMMs of one layer at ~118 us against ~38 of
# floors (wq_a 16.5 us for a 1.6 us floor: 16 tiles of 128 x 128, a tile's whole K on one SM, no
# split of K among cuBLASLt's block-scaled algorithms). The NW = 256 kernel was never measured on
# the plain linears (the twenty-first slice's fp8mid ran 256 rows as two calls of 128).
# (1) Nsight's warp-stall reasons and SASS stall samples of the FP8 expert kernels (EP shape) and
# the wgmma linear at 256 rows (wq_a, the grouped wo_a); (2) the model with --fp8-wgmma-max-rows
# 256 (every FP8 linear of 65-256 rows on the wgmma kernel) against the default, v4-flash-4 batch
# 128 / 256, one binary. The op bench's wgmma / cuBLASLt rows at 64-256 rows and the EP step with
# the knob run in plan_thirty_first_b.sh's call (cut from here to fit one call each).
# If (2) gains: make it the default for the shapes (1) says, in forward_slots.h (kWgmmaMaxRows /
# kWgmmaLtN), with the op bench's figures as the reason.
# Build (here): ninja -C build deepinfer cuda_ops_bench cuda_attn_lt_bench; tools/device/pack_bins.sh
#   build/tools/deepinfer/deepinfer build/tests/cuda/cuda_ops_bench build/tests/cuda/cuda_attn_lt_bench
#   run(carry=[".device-bin.tar.xz"], timeout_s=400, command="tar xJf .device-bin.tar.xz &&
#       GIT_REV=<rev> tools/device/plan_thirty_first.sh")
set -uo pipefail
source "$(dirname "$0")/loops.sh"
plan_start

ncu_stalls fp8x mxfp4_fp8_kernel cuda_ops_bench${OPS_SUFFIX:-} /tmp/o.json x moe:32:48
ncu_stalls wgmma256 fp8_wgmma_kernel cuda_ops_bench${OPS_SUFFIX:-} /tmp/o.json x fp8paths:1024:4096:1:256
ncu_stalls wgmma256g fp8_wgmma_kernel cuda_ops_bench${OPS_SUFFIX:-} /tmp/o.json x fp8paths:1024:4096:8:256
NO_CEILINGS=1 ATTN_CASE=256:512:640 ncu_stalls attn attn_wgmma_kernel cuda_attn_lt_bench${OPS_SUFFIX:-} /tmp/a.json x
f4="--synthetic v4-flash:4" dec="--gen-len 8 --fill-state --prompt-len 4096" wg="--fp8-wgmma-max-rows 256"
export BENCH_CONFIGS="${BENCH_CONFIGS:-b128 $f4 $dec --batch 128
wgb128 $f4 $dec --batch 128 $wg
b256 $f4 $dec --batch 256
wgb256 $f4 $dec --batch 256 $wg}"
run_benches "$BIN/deepinfer" "${BENCH_S:-200}" | grep -E "rc=|^decode |^decode step parts" | cut -c1-150
tar czf "$FINAL/runs.tgz" -C "$OUT" .
echo "done ($((SECONDS - START)) s)"
