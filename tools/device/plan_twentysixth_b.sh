#!/usr/bin/env bash
# The twenty-sixth slice's second device call. RAN 2026-12-06 on an H100 (NCU_S=0): tests and
# sanitizers passed, the change measured slower (EP batch 256 -1.7%, the kernel alone -3.5% to +7%)
# and was dropped; its patch is gone (docs/performance.md, the twenty-sixth slice, has the figures).
#   tools/device/pending/twentysixth-b-persistent-attn.patch: the wgmma attention kernel persistent
#   over its (sequence, split) items (grid min(items, SMs)); the next item's q and first tile are
#   copied during the current item's last tile, and the finish goes through the last tile's stage
#   one warpgroup's half at a time. Why: a block of the old kernel paid ~12 us of set-up (q and the
#   first tile loaded, then the finish, serially) on top of ~5 us a tile: the 8k prefill runs 62
#   waves of such blocks per layer. Registers 208 -> 252 (ptxas, no spills).
# Then Nsight Compute's kernel tables of the 8k prefill and of one EP batch-256 step (this build).
# Build (here, clean tree): tools/device/build_pending_ab.sh "" tools/device/pending/twentysixth-b-persistent-attn.patch
#   run(carry=[".device-bin.tar.xz"], timeout_s=590,
#       command="tar xJf .device-bin.tar.xz && GIT_REV=<rev>+persistent-attn tools/device/plan_twentysixth_b.sh")
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
for c in 256:128:256 128:512:256 132:512:1024 1:512:1024 2048:0:1024 2048:512:1024; do
  for b in cuda_attn_lt_bench-before cuda_attn_lt_bench; do
    ATTN_CASE=$c timeout 60 "$BIN/$b" "$OUT/attn-${c//:/-}-$b.json" x > "$OUT/attn-${c//:/-}-$b.txt" 2>&1
    echo "$b $c rc=$?: $(grep -E '^decode_attention' "$OUT/attn-${c//:/-}-$b.txt" | head -1 | sed 's/  */ /g' | cut -c1-140)"
  done
done
GTEST_FILTER='CudaAttention.PrefillSpeed' run_tests "$BIN" 40 cuda_attn_lt_test
grep -E "prefill speed" "$OUT/test-cuda_attn_lt_test.txt" | cut -c1-170
[ "$TEST_RC" = 0 ] && TEST_RC=$ALL_RC

echo "== deepinfer bench"
F4="--synthetic v4-flash:4"
EP="--synthetic v4-flash-ep8 --batch 256 --prompt-len 4096 --gen-len 4 --fill-state"
export BENCH_CONFIGS="${BENCH_CONFIGS:-p8k $F4 --batch 1 --prompt-len 8192 --gen-len 2
before-p8k $F4 --batch 1 --prompt-len 8192 --gen-len 2
ep256c4k $EP
before-ep256c4k $EP
b32 $F4 --batch 32 --prompt-len 4096 --gen-len 8 --fill-state
before-b32 $F4 --batch 32 --prompt-len 4096 --gen-len 8 --fill-state
b1 $F4 --batch 1 --prompt-len 4096 --gen-len 16 --fill-state
before-b1 $F4 --batch 1 --prompt-len 4096 --gen-len 16 --fill-state}"
run_benches "$BIN/deepinfer" "${BENCH_S:-150}"

left=$((${NCU_S:-520} - (SECONDS - START)))
if [ "$left" -gt 60 ]; then
  mkdir -p "$OUT/p8k"
  echo "== ncu: the 8k prefill kernel by kernel (box $((left / 2)) s)"
  OUT="$OUT/p8k" TIME_S=$((left / 2)) TIME_RANGE=1 TIME_BENCH="$F4 --batch 1 --prompt-len 8192 --gen-len 0" \
    tools/device/run_ncu.sh 2>&1 | tail -42
fi
left=$((${NCU_S:-520} - (SECONDS - START)))
if [ "$left" -gt 60 ]; then
  mkdir -p "$OUT/ep256"
  echo "== ncu: one EP batch-256 step kernel by kernel (box $left s)"
  OUT="$OUT/ep256" TIME_S=$left TIME_RANGE=1 TIME_COUNT=20000 \
    TIME_BENCH="--synthetic v4-flash-ep8 --batch 256 --prompt-len 4096 --gen-len 2 --fill-state" \
    tools/device/run_ncu.sh > "$OUT/ep256/run.txt" 2>&1
  grep -E "^rc=|^decode " "$OUT/ep256/run.txt"
  [ -f "$OUT/ep256/ncu-times.csv.gz" ] &&
    python3 tools/device/ncu_step.py <(zcat "$OUT/ep256/ncu-times.csv.gz") 2>&1 | tee "$OUT/ep256/step.txt" | head -40
fi
plan_finish
echo "tests rc=${TEST_RC:-?} sanitizer rc=${SAN_RC:-?} ($((SECONDS - START)) s)"
