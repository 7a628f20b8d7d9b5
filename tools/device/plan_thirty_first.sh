#!/usr/bin/env bash
# PENDING (written 2026-12-06 on the thirtieth slice's last commit; no CUDA code, host only: the
# knob it measures, CudaTuning::fp8_wgmma_max_rows / `--fp8-wgmma-max-rows`, landed with it).
# Question: at 129-256 rows (the EP step's 256, decode batches 128-256), is the wgmma decode linear
# (fp8_linear_wgmma: weights as wgmma's M, the batch as its N in two halves of 128 sharing each
# weight stage, K split over a cluster where the tiles leave SMs idle; tested against the CPU at
# 1-256 rows in cuda_ops_test) faster than cuBLASLt's timed plan, which the model uses there? The
# thirtieth slice's EP profile has the cuBLASLt FP8 GEMMs of one layer at ~118 us against ~38 of
# floors (wq_a 16.5 us for a 1.6 us floor: 16 tiles of 128 x 128, a tile's whole K on one SM, no
# split of K among cuBLASLt's block-scaled algorithms). The NW = 256 kernel was never measured on
# the plain linears (the twenty-first slice's fp8mid ran 256 rows as two calls of 128).
# (1) the op bench's paths (wgmma against cuBLASLt, first and timed plans) at the V4 shapes at 128,
# 192 and 256 rows; (2) the model with --fp8-wgmma-max-rows 256 (every FP8 linear of 65-256 rows
# on the wgmma kernel) against the default, the EP step and v4-flash-4 batch 128 / 256, one binary.
# If (2) gains: make it the default for the shapes (1) says, in forward_slots.h (kWgmmaMaxRows /
# kWgmmaLtN), with the op bench's figures as the reason.
# Build (here): ninja -C build deepinfer cuda_ops_bench;
#   tools/device/pack_bins.sh build/tools/deepinfer/deepinfer build/tests/cuda/cuda_ops_bench
#   run(carry=[".device-bin.tar.xz"], timeout_s=400, command="tar xJf .device-bin.tar.xz &&
#       GIT_REV=<rev> tools/device/plan_thirty_first.sh")
set -uo pipefail
source "$(dirname "$0")/loops.sh"
plan_start

echo "== op bench: FP8 linear paths at 128-256 rows"
for shape in 1024:4096 512:4096 32768:1024 8192:1024 4096:8192 4096:4096 4096:2048; do
  for m in 128 192 256; do
    timeout 40 "$BIN/cuda_ops_bench" "$OUT/ops-${shape/:/x}-$m.json" "${GIT_REV:-x}" "fp8paths:${shape}:1:${m}" \
      > "$OUT/ops-${shape/:/x}-$m.txt" 2>&1
    echo "$shape M=$m rc=$?"; grep -E "fp8/(wgmma|cublaslt)|plans" "$OUT/ops-${shape/:/x}-$m.txt" | cut -c1-150
  done
done
f4="--synthetic v4-flash:4" dec="--gen-len 8 --fill-state --prompt-len 4096" wg="--fp8-wgmma-max-rows 256"
export BENCH_CONFIGS="${BENCH_CONFIGS:-ep256c4k --synthetic v4-flash-ep8 --batch 256 --gen-len 4 --fill-state --prompt-len 4096
wgep256c4k --synthetic v4-flash-ep8 --batch 256 --gen-len 4 --fill-state --prompt-len 4096 $wg
b128 $f4 $dec --batch 128
wgb128 $f4 $dec --batch 128 $wg
b256 $f4 $dec --batch 256
wgb256 $f4 $dec --batch 256 $wg
ep256c4k2 --synthetic v4-flash-ep8 --batch 256 --gen-len 4 --fill-state --prompt-len 4096}"
run_benches "$BIN/deepinfer" "${BENCH_S:-200}" | grep -E "rc=|^decode |^decode step parts" | cut -c1-150
tar czf "$FINAL/runs.tgz" -C "$OUT" .
echo "done ($((SECONDS - START)) s)"
