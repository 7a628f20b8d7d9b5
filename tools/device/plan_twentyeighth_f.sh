#!/usr/bin/env bash
# The twenty-eighth slice: the decode attention's base split at small batches (`deepinfer bench
# --attn-split`, one build): 64 / 128 / 256 rows at batch 1, 8, 16, 32 (ctx 4k, states filled).
# With base 64, dc::decode_split_rows gives round(SMs / batch) splits a query, at most 10 of 64
# rows for a CSA query's 640 (batch 1-8), 5 of 128 at 16, 4 of 192 at 32; with 256 (today) 3.
# Build (here): tools/device/pack_bins.sh build/tools/deepinfer/deepinfer
#   run(carry=[".device-bin.tar.xz"], timeout_s=300, command="tar xJf .device-bin.tar.xz &&
#       GIT_REV=<rev> tools/device/plan_twentyeighth_f.sh")
set -uo pipefail
source "$(dirname "$0")/loops.sh"
plan_start
F4="--synthetic v4-flash:4"
configs=""
for b in 1 8 16 32; do
  for s in 256 64 128; do
    configs+="b${b}s${s} $F4 --batch $b --prompt-len 4096 --gen-len 16 --fill-state --attn-split $s"$'\n'
  done
done
export BENCH_CONFIGS="${BENCH_CONFIGS:-$configs}"
run_benches "$BIN/deepinfer" "${BENCH_S:-200}" | grep -E "rc=|^decode step parts" | cut -c1-110
tar czf "$FINAL/runs.tgz" -C "$OUT" .
echo "($((SECONDS - START)) s)"
