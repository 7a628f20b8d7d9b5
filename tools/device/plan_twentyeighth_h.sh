#!/usr/bin/env bash
# The twenty-eighth slice's profiles at its head on an H100 (Nsight Compute, each kernel alone):
# one batch-1 decode step of v4-flash:4 at ctx 4k (the H200's table was the twenty-sixth slice's),
# then the 8k prefill (the twenty-seventh's was at 82e3798).
# Build (here): tools/device/pack_bins.sh build/tools/deepinfer/deepinfer
#   run(carry=[".device-bin.tar.xz"], timeout_s=260, command="tar xJf .device-bin.tar.xz &&
#       tools/device/plan_twentyeighth_h.sh")
set -uo pipefail
source "$(dirname "$0")/loops.sh"
plan_start
ncu_step_by_name "${B1_S:-75}" "--synthetic v4-flash:4 --batch 1 --prompt-len 4096 --gen-len 2 --fill-state"
cp "$OUT/step/step.txt" "$FINAL/step-b1.txt" 2>/dev/null
ncu_prefill_table $((${TOTAL_S:-230} - (SECONDS - START))) "--synthetic v4-flash:4 --batch 1 --prompt-len 8192"
plan_finish
echo "($((SECONDS - START)) s)"
