#!/usr/bin/env bash
# RAN on an H100 on 2026-12-06 (the thirtieth slice's first call, with plan_thirtieth_b.sh;
# bench/results/logs/thirtieth-h100-ncu-*). Written on 7e4d698. No code change: the profiles the next EP work needs. (1) Nsight Compute's sections for
# the FP8 expert kernels at the EP shape (cuda_ops_bench moe:32:48: w13 + SwiGLU and w2 of 32
# experts x 48 rows, 1.6x their bytes in the EP step); (2) the EP step launch by launch (which of
# the ~5 cuBLASLt FP8 GEMMs a layer is which, now that the shared w1 / w3 are one), in $OUT/step.
# Build (here): ninja -C build deepinfer cuda_ops_bench;
#   tools/device/pack_bins.sh build/tools/deepinfer/deepinfer build/tests/cuda/cuda_ops_bench
#   run(carry=[".device-bin.tar.xz"], timeout_s=500, command="tar xJf .device-bin.tar.xz &&
#       GIT_REV=<rev> tools/device/plan_thirtieth.sh")
set -uo pipefail
source "$(dirname "$0")/loops.sh"
plan_start

echo "== ncu sections: mxfp4_fp8_kernel in moe:32:48"
OUT="$OUT" KERNEL_S=120 KERNEL_ARGS="mxfp4_fp8_kernel moe:32:48" tools/device/run_ncu.sh 2>&1 | head -90
ncu_step_by_name 300 "--synthetic v4-flash-ep8 --batch 256 --gen-len 2 --fill-state --prompt-len 4096"
[ -f "$OUT/step/ncu-times.csv.gz" ] &&
  python3 tools/device/ncu_step.py <(zcat "$OUT/step/ncu-times.csv.gz") 2000 > "$OUT/step/launches.txt" 2>&1
tar czf "$FINAL/profiles.tgz" -C "$OUT" .
echo "done ($((SECONDS - START)) s)"
