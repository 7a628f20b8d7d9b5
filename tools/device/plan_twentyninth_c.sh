#!/usr/bin/env bash
# RAN on an H100 2026-12-06 09:38 UTC. The twenty-ninth slice, third call: would the batch-1 step's experts run faster on the wide
# kernels (--moe-wide-rows: 6 routed rows to the FP8 wgmma kernel) than on the narrow f16 one? The
# paths alone at 6 experts x 1 row (cuda_ops_bench moe:6:1, and 24 x 1, 6 x 4) and the b1 / b4
# steps with each.
# Build (here, git 588feed): as plan_twentyninth_b.sh.
set -uo pipefail
source "$(dirname "$0")/loops.sh"
plan_start
for shape in 6:1 24:1 6:4; do
  timeout 60 "$BIN/cuda_ops_bench" "$OUT/ops-${shape/:/x}.json" "${GIT_REV:-?}" "moe:$shape" > "$OUT/ops-${shape/:/x}.txt" 2>&1
  echo "moe:$shape rc=$?"; grep -E "^moe_" "$OUT/ops-${shape/:/x}.txt" | cut -c1-150
done
F4="--synthetic v4-flash:4 --gen-len 8 --fill-state --prompt-len 4096"
export BENCH_CONFIGS="b1 $F4 --batch 1
b1wide $F4 --batch 1 --moe-wide-rows 1
b4 $F4 --batch 4
b4wide $F4 --batch 4 --moe-wide-rows 1
b1again $F4 --batch 1"
run_benches "$BIN/deepinfer" 100 | grep -E "rc=|^decode |^decode step parts" | cut -c1-150
tar czf "$FINAL/runs.tgz" -C "$OUT" .
echo "done ($((SECONDS - START)) s)"
