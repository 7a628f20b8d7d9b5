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

attn_checks_ab "256:128:256 128:512:256 132:512:1024 1:512:1024"

BOX=${BENCH_S:-$((560 - (SECONDS - START)))}
[ "$BOX" -ge 60 ] || BOX=60
echo "== deepinfer bench (box $BOX s)"
F4="--synthetic v4-flash:4"
EP="--synthetic v4-flash-ep8 --batch 256 --prompt-len 4096 --gen-len 4 --fill-state"
export BENCH_CONFIGS="${BENCH_CONFIGS:-$(ab_pairs "p8k $F4 --batch 1 --prompt-len 8192 --gen-len 2
ep256c4k $EP
b32 $F4 --batch 32 --prompt-len 4096 --gen-len 8 --fill-state")
p8kprof $F4 --batch 1 --prompt-len 8192 --gen-len 2 --profile}"
run_benches "$BIN/deepinfer" "$BOX"
plan_finish
echo "tests rc=${TEST_RC:-?} sanitizer rc=${SAN_RC:-?} ($((SECONDS - START)) s)"
