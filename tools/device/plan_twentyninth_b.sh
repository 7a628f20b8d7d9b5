#!/usr/bin/env bash
# RAN on an H100 2026-12-06 09:36 UTC. The twenty-ninth slice, second call: where the batch-1 step's big kernels lose to their bytes.
# The b1 step (H100 ncu, 28th slice) spent 373 us in 33 FP8 GEMVs and 225 us in 8 MXFP4 grouped
# launches (the experts at ~2.2x their bytes). Here: (1) Nsight Compute's sections for the narrow
# MXFP4 kernel at batch 1 (cuda_ops_bench mxdec: w1 + w3 of 6 experts, then w2); (2) the b1 step
# launch by launch (ncu_step.py, first 190 launches in order) to see each GEMV's shape and time.
# Build (here, git 588feed): ninja -C build deepinfer cuda_ops_bench;
#   tools/device/pack_bins.sh build/tools/deepinfer/deepinfer build/tests/cuda/cuda_ops_bench
#   run(carry=[".device-bin.tar.xz"], timeout_s=400, command="tar xJf .device-bin.tar.xz &&
#       GIT_REV=588feed tools/device/plan_twentyninth_b.sh")
set -uo pipefail
source "$(dirname "$0")/loops.sh"
plan_start

echo "== cuda_ops_bench mxdec"
timeout 60 "$BIN/cuda_ops_bench" "$OUT/ops-mxdec.json" "${GIT_REV:-?}" mxdec > "$OUT/ops-mxdec.txt" 2>&1
echo "rc=$?"; grep -E "^mxfp4|^expert|us " "$OUT/ops-mxdec.txt" | head -12 | cut -c1-170
echo "== ncu sections: mxfp4_grouped_kernel in mxdec"
OUT="$OUT" KERNEL_S=120 KERNEL_ARGS="mxfp4_grouped_kernel mxdec" tools/device/run_ncu.sh 2>&1 | head -130
ncu_step_by_name 200 "--synthetic v4-flash:4 --batch 1 --gen-len 3 --fill-state --prompt-len 4096"
[ -f "$OUT/step/ncu-times.csv.gz" ] &&
  python3 tools/device/ncu_step.py <(zcat "$OUT/step/ncu-times.csv.gz") 200 > "$OUT/step/launches.txt" 2>&1
tar czf "$FINAL/runs.tgz" -C "$OUT" .
echo "done ($((SECONDS - START)) s)"
