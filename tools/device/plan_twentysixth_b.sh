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

attn_checks_ab "256:128:256 128:512:256 132:512:1024 1:512:1024 2048:0:1024 2048:512:1024"

echo "== deepinfer bench"
F4="--synthetic v4-flash:4"
EP="--synthetic v4-flash-ep8 --batch 256 --prompt-len 4096 --gen-len 4 --fill-state"
export BENCH_CONFIGS="${BENCH_CONFIGS:-$(ab_pairs "p8k $F4 --batch 1 --prompt-len 8192 --gen-len 2
ep256c4k $EP
b32 $F4 --batch 32 --prompt-len 4096 --gen-len 8 --fill-state
b1 $F4 --batch 1 --prompt-len 4096 --gen-len 16 --fill-state")}"
run_benches "$BIN/deepinfer" "${BENCH_S:-150}"

ncu_prefill_table $(((${NCU_S:-520} - (SECONDS - START)) / 2)) "$F4 --batch 1 --prompt-len 8192"
ncu_step_by_name $((${NCU_S:-520} - (SECONDS - START))) \
  "--synthetic v4-flash-ep8 --batch 256 --prompt-len 4096 --gen-len 2 --fill-state"
plan_finish
echo "tests rc=${TEST_RC:-?} sanitizer rc=${SAN_RC:-?} ($((SECONDS - START)) s)"
