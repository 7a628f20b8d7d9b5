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
ncu_prefill_table "${P8K_S:-150}" "--synthetic v4-flash:4 --batch 1 --prompt-len 8192"
ncu_step_by_name $((${NCU_S:-380} - (SECONDS - START))) \
  "--synthetic v4-flash-ep8 --batch 256 --prompt-len 4096 --gen-len 2 --fill-state"
plan_finish
echo "($((SECONDS - START)) s)"
