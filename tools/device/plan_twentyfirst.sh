#!/usr/bin/env bash
# The twenty-first slice's first device call (written 2026-12-05 with the device budget spent):
#   1. the two pending patches (tools/device/pending/twentyfirst-host-tables.patch, then
#      twentyfirst-hca-prefix.patch, applied and built first: DecodeInputs::plan walks each
#      sequence's layers together; HCA attention reads its rows with no index array) under the tests
#      that cover them (attention parity incl. PrefixIndexEqualsExplicitIndex, V4 model, synthetic,
#      engine);
#   2. the EP batch-256 step with it and without it (before-*): the "host preparation" line was
#      1.5-2.1 ms of a 33.5 ms step on the H100, serial with the device in the bench's loop; and
#      the serving engine's overlapped loop on the same batch (--engine), which should hide it;
#      and the 8k prefill with and without (its HCA index was 2 MB filled and uploaded per chunk) and
#      by part (--profile: where its 23.5% of the FP8 rate goes now);
#   3. the wgmma attention's fixed cost per block against its cost per tile: one block per SM
#      (batch 132) over 2, 4, 8 and 16 tiles (window 128 + 0 / 128 / 384 / 896 compressed rows,
#      one split): at the EP shape a block has 4 tiles and the block's prologue and finish may be
#      a third of its time (125 us for 256 blocks in two waves before the twentieth slice);
#   4. Nsight Compute's sections for the FP8 expert kernels at the EP shape (cuda_ops_bench moe:32:48:
#      w1/w3 + SwiGLU at 155.8 us and w2 at 77.4 us a layer, 1.6x their bytes: what holds them);
#   5. with the time left, every kernel of one EP batch-256 decode step serialised and timed by
#      Nsight Compute (the eighteenth slice's table, for this build).
# Run from the repository root on the GPU machine after `tar xJf .device-bin.tar.xz`
# (tools/device/pack_bins.sh: deepinfer with the patches, deepinfer-before without, the four test
# binaries and cuda_attn_lt_bench), with timeout_s 590:
#   run(carry=[".device-bin.tar.xz"], command="tar xJf .device-bin.tar.xz && GIT_REV=<rev> tools/device/plan_twentyfirst.sh")
set -uo pipefail
source "$(dirname "$0")/loops.sh"
plan_start

echo "== tests (box ${TESTS_S:-150} s)"
# shellcheck disable=SC2086
run_tests "$BIN" "${TESTS_S:-150}" ${TESTS:-cuda_attn_lt_test cuda_v4_model_test cuda_v4_synthetic_test cuda_v4_engine_test}

echo "== deepinfer bench (box ${BENCH_S:-160} s)"
EPB="--synthetic v4-flash-ep8 --batch 256 --prompt-len 512"
EP="$EPB --gen-len 4"
export BENCH_CONFIGS="${BENCH_CONFIGS:-ep256 $EP
before-ep256 $EP
ep256eng $EPB --gen-len 8 --engine
p8k --synthetic v4-flash:4 --batch 1 --prompt-len 8192 --gen-len 4
before-p8k --synthetic v4-flash:4 --batch 1 --prompt-len 8192 --gen-len 4
p8kprof --synthetic v4-flash:4 --batch 1 --prompt-len 8192 --gen-len 2 --profile}"
run_benches "$BIN/deepinfer" "${BENCH_S:-160}"

echo "== wgmma attention, one block per SM over 2-16 tiles (box ${ATTN_S:-60} s)"
ATTN_END=$((SECONDS + ${ATTN_S:-60}))
for n in 0 128 384 896; do
  left=$((ATTN_END - SECONDS))
  [ "$left" -gt 5 ] || break
  ATTN_CASE=132:$n:1024 timeout "$left" "$BIN/cuda_attn_lt_bench" "$OUT/attn-tiles-$n.json" "${GIT_REV:-unknown}" \
    2>&1 | grep -E "decode_attention" | cut -c1-150
done

left=$((${TOTAL_S:-560} - (SECONDS - START) - ${KERNEL_S:-60}))
if [ "$left" -gt 60 ]; then
  echo "== ncu: the FP8 expert kernels at the EP shape (32 experts x 48 rows; box ${KERNEL_S:-60} s), then one EP"
  echo "   batch-256 decode step kernel by kernel (box $left s)"
  OUT="$OUT" KERNEL_ARGS="mxfp4_fp8_kernel moe:32:48" KERNEL_S=${KERNEL_S:-60} TIME_S=$left TIME_RANGE=1 \
    TIME_COUNT=2400 TIME_BENCH="$EP" tools/device/run_ncu.sh 2>&1 | tail -120
fi
plan_finish
echo "tests rc=${TEST_RC:-?}"
