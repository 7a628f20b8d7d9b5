#!/usr/bin/env bash
# The thirty-ninth slice's fifth call (2026-12-07 ~11:50 UTC): the slice's build (fa19b3e) against
# the session's base (e3f61f8, deepinfer-before) at the decode sizes the fourth call left out
# (batch 16, 32, 64 at ctx 4k; batch 1 and 32 at ctx 32k) and the 8k prefill (nothing of the
# slice runs there: a check). No tests (the fourth call ran them on the same code).
# Build (here): tools/device/pack_bins.sh build/tools/deepinfer/deepinfer /tmp/before/deepinfer-before;
#   run(carry=[".device-bin.tar.xz"], timeout_s=200, command="tar xJf .device-bin.tar.xz && tools/device/plan_thirty_ninth_e.sh")
set -uo pipefail
source "$(dirname "$0")/loops.sh"
plan_start
f4="--synthetic v4-flash:4 --gen-len 8 --fill-state"
export BENCH_CONFIGS="$(ab_pairs "b16 $f4 --prompt-len 4096 --batch 16
b32 $f4 --prompt-len 4096 --batch 32
b64 $f4 --prompt-len 4096 --batch 64
c32k-b1 $f4 --prompt-len 32768 --batch 1
c32k-b32 $f4 --prompt-len 32768 --batch 32
p8k --synthetic v4-flash:4 --batch 1 --prompt-len 8192 --gen-len 2")"
run_benches "$BIN/deepinfer" 170 | grep -E "rc=[1-9]" | cut -c1-150
for f in "$OUT"/bench-*.txt; do
  printf '%s: %s | %s | %s\n' "$(basename "$f" .txt)" "$(grep -oE 'device [0-9.]+ ms' "$f" | head -1)" \
    "$(grep -oE 'step [0-9.]+ ms; memory floor [0-9.]+ ms' "$f" | head -1)" "$(grep -E '^prefill ' "$f" | tr -s ' ' | cut -c1-110)"
done
plan_finish
echo "done ($((SECONDS - START)) s)"
