#!/usr/bin/env bash
# The twenty-eighth slice's last call, part 1 (then tools/device/plan_matrix.sh with PEER_S=0 at
# the same build: the issue's matrix at the slice's head, the peer column from
# bench/results/peer-transformers-h100.json). Here: the default mode's decode split size
# (kDecodeSplit, 256) against 320 / 384 / one split, the wgmma attention with its combine alone
# (bf16 partials), at the decode shapes of ctx 4k: CSA 128 + 512 rows, HCA 128 + 32, batches 1-256.
# The default mode may choose its split by batch (its rows' bits already follow the launch size);
# batch-invariant mode runs one split per query.
# Build (here): tools/device/pack_bins.sh build/tools/deepinfer/deepinfer build/tests/cuda/cuda_attn_lt_bench
#   run(carry=[".device-bin.tar.xz"], timeout_s=590, command="tar xJf .device-bin.tar.xz &&
#       tools/device/plan_twentyeighth_d.sh && PEER_S=0 BENCH_S=360 GIT_REV=<rev> tools/device/plan_matrix.sh")
set -uo pipefail
source "$(dirname "$0")/loops.sh"
plan_start
echo "== decode attention with its combine by split size (ATTN_CASE=B:N_CMP:SPLIT, CUDA-graph timed)"
for b in 1 8 32 64 128 256; do
  for c in "$b:512:256" "$b:512:320" "$b:512:384" "$b:512:640"; do
    f="$OUT/attn-${c//:/-}.txt"
    ATTN_CASE=$c timeout 30 "$BIN/cuda_attn_lt_bench" "$OUT/attn-${c//:/-}.json" x > "$f" 2>&1
    echo "$c rc=$?: $(grep -E '^decode_attention|error' "$f" | head -1 | sed 's/  */ /g' | cut -c1-140)"
  done
done
echo "($((SECONDS - START)) s)"
