#!/usr/bin/env bash
# The EP b256 ctx-4k decode step kernel by kernel at the twenty-eighth slice's head (Nsight Compute,
# each kernel serialised: the twenty-seventh slice's table was at 82e3798, before the bf16 partials
# and the split by batch).
# Build (here): tools/device/pack_bins.sh build/tools/deepinfer/deepinfer
#   run(carry=[".device-bin.tar.xz"], timeout_s=330, command="tar xJf .device-bin.tar.xz &&
#       NCU_S=290 tools/device/plan_twentyeighth_g.sh")
set -uo pipefail
source "$(dirname "$0")/loops.sh"
plan_start
ncu_step_by_name $((${NCU_S:-290} - (SECONDS - START))) \
  "--synthetic v4-flash-ep8 --batch 256 --prompt-len 4096 --gen-len 2 --fill-state"
cp "$OUT/step/step.txt" "$FINAL/" 2>/dev/null
echo "($((SECONDS - START)) s)"
