#!/usr/bin/env bash
# The thirty-seventh slice's last call (2026-12-07): batch 1's decode step kernel by kernel (Nsight
# Compute, every launch of one step serialised, at the card's clocks, caches not flushed) at
# ad3aa79, the fused mHC post in (one hc_partial_decode launch a step where there were nine).
# Build (here): tools/device/pack_bins.sh build/tools/deepinfer/deepinfer
#   run(carry=[".device-bin.tar.xz"], timeout_s=200, command="tar xJf .device-bin.tar.xz &&
#       tools/device/plan_thirty_seventh_c.sh")
set -uo pipefail
source "$(dirname "$0")/loops.sh"
plan_start
ncu_step_table $((${TOTAL_S:-170} - (SECONDS - START))) \
  "--synthetic v4-flash:4 --batch 1 --gen-len 8 --fill-state --prompt-len 4096" 48
plan_finish
echo "done ($((SECONDS - START)) s)"
