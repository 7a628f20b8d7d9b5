#!/usr/bin/env bash
# The next device call (written 2026-12-06, the session's device budget spent on failed starts):
#   tools/device/pending/twentysixth-attn-split.patch: the wgmma attention kernel computes q K^T
#   once per tile instead of in both warpgroups: warpgroup w takes the tile's rows 32w .. 32w + 31
#   (m64n32k16), the row maxima, P halves and row sums cross through 11 KB of static shared memory
#   (two more block barriers a tile), and P V is as before. A tile's MMA work goes from 3 units to
#   2; registers 235 -> 208 (ptxas, no spills). Written because the 8k prefill spends 12.6 ms in
#   attention at 7x its FLOP floor (the twenty-first slice) and the EP step 72 us a layer.
#   Not bitwise equal to the kernel before (l sums its halves), within the tests' tolerances.
# Build (here, clean tree): tools/device/build_pending_ab.sh "" tools/device/pending/twentysixth-attn-split.patch
#   run(carry=[".device-bin.tar.xz"], timeout_s=590,
#       command="tar xJf .device-bin.tar.xz && GIT_REV=<rev>+attn-split tools/device/plan_twentysixth.sh")
# If the tests pass and the A/B gains: commit the patched tree, drop the patch here; then
# tools/device/plan_misses.sh (fresh profiles of the missed targets).
set -uo pipefail
source "$(dirname "$0")/loops.sh"
plan_start

echo "== tests"
GTEST_FILTER='CudaAttention.*' run_tests "$BIN" 90 cuda_attn_lt_test
KRC=$TEST_RC
run_tests "$BIN" "${TESTS_S:-140}" cuda_v4_model_test cuda_v4_synthetic_test cuda_v4_engine_test
[ "$KRC" = 0 ] || TEST_RC=1
ALL_RC=$TEST_RC
run_sanitized "$BIN" 100 "racecheck:cuda_attn_lt_test:CudaAttention.PrefixIndexEqualsExplicitIndex" \
  "memcheck:cuda_attn_lt_test:CudaAttention.PrefixIndexEqualsExplicitIndex"

echo "== the attention kernel alone, before / after (ATTN_CASE=B:N_CMP:SPLIT, CUDA-graph timed)"
for c in 256:128:256 128:512:256 132:512:1024 1:512:1024; do
  for b in cuda_attn_lt_bench-before cuda_attn_lt_bench; do
    ATTN_CASE=$c timeout 60 "$BIN/$b" "$OUT/attn-${c//:/-}-$b.json" x > "$OUT/attn-${c//:/-}-$b.txt" 2>&1
    echo "$b $c rc=$?: $(grep -E '^decode_attention' "$OUT/attn-${c//:/-}-$b.txt" | head -1 | sed 's/  */ /g' | cut -c1-140)"
  done
done
GTEST_FILTER='CudaAttention.PrefillSpeed' run_tests "$BIN" 40 cuda_attn_lt_test
grep -E "prefill speed" "$OUT/test-cuda_attn_lt_test.txt" | cut -c1-170
[ "$TEST_RC" = 0 ] && TEST_RC=$ALL_RC

BOX=${BENCH_S:-$((560 - (SECONDS - START)))}
[ "$BOX" -ge 60 ] || BOX=60
echo "== deepinfer bench (box $BOX s)"
F4="--synthetic v4-flash:4"
EP="--synthetic v4-flash-ep8 --batch 256 --prompt-len 4096 --gen-len 4 --fill-state"
export BENCH_CONFIGS="${BENCH_CONFIGS:-p8k $F4 --batch 1 --prompt-len 8192 --gen-len 2
before-p8k $F4 --batch 1 --prompt-len 8192 --gen-len 2
ep256c4k $EP
before-ep256c4k $EP
b32 $F4 --batch 32 --prompt-len 4096 --gen-len 8 --fill-state
before-b32 $F4 --batch 32 --prompt-len 4096 --gen-len 8 --fill-state
p8kprof $F4 --batch 1 --prompt-len 8192 --gen-len 2 --profile}"
run_benches "$BIN/deepinfer" "$BOX"
plan_finish
echo "tests rc=${TEST_RC:-?} sanitizer rc=${SAN_RC:-?} ($((SECONDS - START)) s)"
