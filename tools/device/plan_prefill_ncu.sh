#!/usr/bin/env bash
# Kernel-by-kernel device time (Nsight Compute, each kernel serialised and timed alone) of the two
# rows of the issue's matrix furthest from their targets, for the build carried in .device-bin:
#   1. the 8k prefill of v4-flash-4 (--gen-len 0: `deepinfer bench` then makes the timed prefill
#      the profiler's span, so the warm-up pass is not recorded);
#   2. one EP-slice decode step at batch 256, context 4096 (states filled; tools/device/ncu_step.py
#      picks the kernels between the last two sampling launches).
#   run(carry=[".device-bin.tar.xz"], timeout_s=420,
#       command="tar xJf .device-bin.tar.xz && GIT_REV=<rev> tools/device/plan_prefill_ncu.sh")
set -uo pipefail
source "$(dirname "$0")/loops.sh"
plan_start
P8K="--synthetic v4-flash:4 --batch 1 --prompt-len 8192 --gen-len 0"
mkdir -p "$OUT/p8k" "$OUT/ep256"
OUT="$OUT/p8k" TIME_S=${P8K_S:-150} TIME_RANGE=1 TIME_BENCH="$P8K" tools/device/run_ncu.sh 2>&1 | tail -45
left=$((${NCU_S:-380} - (SECONDS - START)))
if [ "$left" -gt 60 ]; then
  OUT="$OUT/ep256" TIME_S=$left TIME_RANGE=1 TIME_COUNT=20000 \
    TIME_BENCH="--synthetic v4-flash-ep8 --batch 256 --prompt-len 4096 --gen-len 2 --fill-state" \
    tools/device/run_ncu.sh > "$OUT/ep256/run.txt" 2>&1
  grep -E "^rc=|^decode " "$OUT/ep256/run.txt"
  python3 tools/device/ncu_step.py <(zcat "$OUT/ep256/ncu-times.csv.gz") 2>&1 | tee "$OUT/ep256/step.txt" | head -45
fi
plan_finish
echo "($((SECONDS - START)) s)"
