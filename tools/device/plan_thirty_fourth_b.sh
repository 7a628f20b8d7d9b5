#!/usr/bin/env bash
# The thirty-fourth slice's second plan (run after plan_thirty_fourth.sh, with the pending
# thirty-fourth patch applied and its defaults settled): where a step's time goes now, kernel by
# kernel (Nsight Compute, serialised; its clocks and cache flushes, so read the ranks and the
# counts, not the sums). The last batch-1 table is the twenty-ninth slice's (before the FP8
# experts from one row, the mHC pre + norm launch, the q tail's bf16 input); the last EP table the
# thirtieth's. Batch 1 first (the cheaper run), then the EP step with what is left of the box.
set -uo pipefail
source "$(dirname "$0")/loops.sh"
plan_start
F4="--synthetic v4-flash:4"
ncu_step_table $((${NCU_B1_S:-200} - (SECONDS - START))) "$F4 --batch 1 --prompt-len 4096 --gen-len 3 --fill-state" 70
EP="--synthetic v4-flash-ep8 --batch 256 --gen-len 3 --fill-state --prompt-len 4096"
ncu_step_table $((${TOTAL_S:-540} - (SECONDS - START))) "$EP" 50
plan_finish
echo "done ($((SECONDS - START)) s)"
