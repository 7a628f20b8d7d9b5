#!/usr/bin/env bash
# The thirty-eighth slice's last plan (2026-12-07, the session's last device seconds; ran on an H100
# at ~09:53 UTC, but the first 4 launches it caught were mxfp4_fp8_kernel<128, *> (1-2 ms each: the
# bench's warm-up before the timed steps, not batch 1's 64-row kernels): stall reasons per issued
# instruction 4.7 (wait 1.08, selected 1.00, short_scoreboard 0.60, long_scoreboard 0.46), in
# logs/thirty-eighth-h100-h-ncu-experts.txt; the batch-1 launches need -k with a launch skip). Nsight
# Compute's stall reasons and SASS page for the FP8 expert kernels at batch 1 (the first 4
# mxfp4_fp8_kernel launches of a v4-flash-4 decode at ctx 4k): the largest gap to the bytes floor
# left at batch 1 (29 us for w13's 50 MB, 15 us for w2's 25 MB: ~1.7 TB/s), for the next session.
# Build (here): tools/device/pack_bins.sh build/tools/deepinfer/deepinfer; run(carry=[".device-bin.tar.xz"],
#   timeout_s=200, command="tar xJf .device-bin.tar.xz && tools/device/plan_thirty_eighth_h.sh")
set -uo pipefail
source "$(dirname "$0")/loops.sh"
plan_start
ncu_stalls experts-b1 mxfp4_fp8_kernel deepinfer bench --device cuda --synthetic v4-flash:4 --batch 1 --prompt-len 4096 \
  --fill-state --gen-len 2
grep -E "Duration|DRAM Throughput|Memory Throughput|Compute \(SM\)" "$OUT/ncu-experts-b1.txt" | head -16
plan_finish
echo "done ($((SECONDS - START)) s)"
