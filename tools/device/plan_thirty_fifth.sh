#!/usr/bin/env bash
# Written 2026-12-06 at the end of the thirty-fourth slice's session (device time spent); not run.
# Question: at decode batches 1-8 the FP8 expert kernels move their weights at ~1.8 TB/s (the
# thirty-fourth slice's batch-1 ncu table: w1/w3 27.9 us for ~50 MB, w2 13.5 us for ~25 MB on an
# H200), each of the 192 blocks taking its 32 (16) K chunks through a serial chain of ~0.8 us a
# chunk. Which link of the chain (cp.async wait, the block barrier, the scale / table loads, the
# dequantisation, wgmma wait, the promotion) holds the warps? Nsight Compute's warp-stall reasons
# and its SASS stall samples for mxfp4_fp8_kernel at batch 1 and 8 (v4-flash-4, ctx 4k, states
# filled; the first 4 launches: two layers' w1/w3 and w2 of the first decode step), and the
# same for the batch-1 GEMV (fp8_gemv_kernel, ~57% of the copy rate) for comparison.
# What to do with it: a chain bound by the barrier or the copy wait argues for warp-group
# barriers / per-warpgroup stages; one bound by issue for a leaner dequantisation; a split of K
# needs a smaller-register variant first (the kernel sits at 128 registers, two blocks an SM).
# Build (here): ninja -C build deepinfer; tools/device/pack_bins.sh build/tools/deepinfer/deepinfer
#   run(carry=[".device-bin.tar.xz"], timeout_s=420, command="tar xJf .device-bin.tar.xz &&
#       tools/device/plan_thirty_fifth.sh")
set -uo pipefail
source "$(dirname "$0")/loops.sh"
plan_start
dec="bench --device cuda --synthetic v4-flash:4 --prompt-len 4096 --gen-len 2 --fill-state"
# shellcheck disable=SC2086
ncu_stalls experts-b1 mxfp4_fp8_kernel deepinfer $dec --batch 1
# shellcheck disable=SC2086
ncu_stalls experts-b8 mxfp4_fp8_kernel deepinfer $dec --batch 8
# shellcheck disable=SC2086
ncu_stalls gemv-b1 fp8_gemv_kernel deepinfer $dec --batch 1
tar czf "$FINAL/logs.tgz" -C "$OUT" .
echo "done ($((SECONDS - START)) s)"
