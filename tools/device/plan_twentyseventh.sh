#!/usr/bin/env bash
# The next device call (written 2026-12-06 after the session's device budget ended; not yet run):
#   1. The window-only attention bench fault of the twenty-sixth slice: `ATTN_CASE=2048:0:1024
#      cuda_attn_lt_bench` (2,048 ring-mode queries, 128 window rows each, no compressed rows) ended
#      with cudaErrorInvalidAddressSpace at its first stream synchronisation, intermittently, for
#      the landed kernel. Where it starts (batch, rows, split, with and without the ceilings the bench
#      measures first), then compute-sanitizer memcheck over the first shape that fails
#      (NO_CEILINGS=1 skips the 8192^3 GEMM that would take minutes under the sanitizer).
#   2. Nsight Compute's kernel tables of the 8k prefill (`deepinfer bench --gen-len 0`: the timed
#      prefill is the profiler's span) and of one EP batch-256 step at ctx 4096: the twenty-sixth
#      slice's profiles are eager parts only for these two rows.
# Build (here): ninja -C build deepinfer cuda_attn_lt_bench cuda_attn_lt_test &&
#   tools/device/pack_bins.sh build/tools/deepinfer/deepinfer build/tests/cuda/cuda_attn_lt_bench build/tests/cuda/cuda_attn_lt_test
#   run(carry=[".device-bin.tar.xz"], timeout_s=500,
#       command="tar xJf .device-bin.tar.xz && GIT_REV=<rev> tools/device/plan_twentyseventh.sh")
set -uo pipefail
source "$(dirname "$0")/loops.sh"
plan_start

echo "== the window-only attention shapes (rc and the first error line of each run)"
first_fail=""
for c in 256:0:1024 1024:0:1024 2048:0:1024 2048:0:1024 4096:0:1024 2048:0:128 2048:64:1024 2048:512:1024; do
  for ceil in 0 1; do
    f="$OUT/attn-${c//:/-}-ceil$ceil.txt"
    if [ "$ceil" = 1 ]; then
      ATTN_CASE=$c timeout 60 "$BIN/cuda_attn_lt_bench" /tmp/x.json x > "$f" 2>&1
    else
      NO_CEILINGS=1 ATTN_CASE=$c timeout 60 "$BIN/cuda_attn_lt_bench" /tmp/x.json x > "$f" 2>&1
    fi
    rc=$?
    echo "$c ceilings=$ceil rc=$rc: $(grep -E '^decode_attention|error|not supported' "$f" | head -1 | sed 's/  */ /g' | cut -c1-130)"
    [ "$rc" != 0 ] && [ -z "$first_fail" ] && first_fail=$c
  done
done
SAN=$(command -v compute-sanitizer || ls /usr/local/cuda*/bin/compute-sanitizer 2>/dev/null | head -1)
for c in ${first_fail:-2048:0:1024} 256:0:1024; do
  echo "== memcheck, ATTN_CASE=$c NO_CEILINGS=1"
  NO_CEILINGS=1 ATTN_CASE=$c timeout 120 "$SAN" --tool memcheck "$BIN/cuda_attn_lt_bench" /tmp/x.json x \
    > "$OUT/memcheck-${c//:/-}.txt" 2>&1
  echo "rc=$?"; grep -vE "^ *$" "$OUT/memcheck-${c//:/-}.txt" | grep -E "=====|decode_attention" | head -24 | cut -c1-160
done

ncu_prefill_table $(((${NCU_S:-470} - (SECONDS - START)) / 2)) "--synthetic v4-flash:4 --batch 1 --prompt-len 8192"
ncu_step_by_name $((${NCU_S:-470} - (SECONDS - START))) \
  "--synthetic v4-flash-ep8 --batch 256 --prompt-len 4096 --gen-len 2 --fill-state"
plan_finish
echo "($((SECONDS - START)) s)"
