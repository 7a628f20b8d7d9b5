#!/usr/bin/env bash
# Ran once, 2026-12-06 on an H100 (bench/results/logs/twentyseventh-h100-serial-splits.txt,
# deepinfer-bench-synthetic-h100-twentyseventh-b.json); the serial splits were then dropped (slower)
# and their code, test (CudaAttention.SerialSplitsBitwise) and bench switch (ATTN_SERIAL) removed:
# this plan stays as the record and no longer runs as written. What it tested:
#   The wgmma decode attention's serial splits (DecodeAttnArgs::serial_splits): where one block per
#   (split, sequence) would take more than two waves and the sequences alone fill half the SMs,
#   one block per sequence runs its splits in turn and merges them itself, bitwise as the combine
#   kernel does (the EP step at batch 256: 768 blocks + a 65 us combine per CSA layer, H100 ncu).
#   Also the benches' upload race (dalloc's random fill on the non-blocking stream, then a legacy
#   cudaMemcpy): the window-only attention case's cudaErrorInvalidAddressSpace, re-run here.
#   And the MoE's combine fused with the mHC post (moe_combine_hc_post: one pass, no f row).
# Build (here): ninja -C build deepinfer cuda_attn_lt_bench cuda_attn_lt_test cuda_v4_model_test
#   cuda_v4_synthetic_test cuda_v4_engine_test cuda_layer_ops_test; mv .device-bin.tar.xz .device-bin-before.tar.xz (the
#   HEAD build before the change); tools/device/pack_bins.sh build/tools/deepinfer/deepinfer
#   build/tests/cuda/{cuda_attn_lt_bench,cuda_attn_lt_test,cuda_v4_model_test,cuda_v4_synthetic_test,cuda_v4_engine_test,cuda_layer_ops_test}
#   run(carry=[".device-bin.tar.xz", ".device-bin-before.tar.xz"], timeout_s=560, command=
#     "tar xJf .device-bin-before.tar.xz && mv .device-bin/bin/deepinfer /tmp/deepinfer-before &&
#      tar xJf .device-bin.tar.xz && mv /tmp/deepinfer-before .device-bin/bin/ &&
#      GIT_REV=<rev> tools/device/plan_twentyseventh_b.sh")
set -uo pipefail
source "$(dirname "$0")/loops.sh"
plan_start

echo "== tests"
GTEST_FILTER='CudaAttention.*' run_tests "$BIN" 90 cuda_attn_lt_test
grep -E "serial splits" "$OUT/test-cuda_attn_lt_test.txt" | head -8
krc=$TEST_RC
GTEST_FILTER='CudaLayerOps.Hc*:CudaLayerOps.Moe*' run_tests "$BIN" 60 cuda_layer_ops_test
[ "$TEST_RC" = 0 ] || krc=1
run_tests "$BIN" "${TESTS_S:-140}" cuda_v4_model_test cuda_v4_synthetic_test cuda_v4_engine_test
[ "$krc" = 0 ] || TEST_RC=1
run_sanitized "$BIN" 90 "racecheck:cuda_attn_lt_test:CudaAttention.SerialSplitsBitwise" \
  "memcheck:cuda_attn_lt_test:CudaAttention.SerialSplitsBitwise"

echo "== the wgmma attention kernel alone: ATTN_SERIAL -1 (split blocks + combine) / 0 (chosen) / 1 (serial)"
for c in 256:512:256 128:512:256 64:512:256 256:256:256 32:512:256 2048:0:1024; do
  for sv in -1 0 1; do
    f="$OUT/attn-${c//:/-}-s$sv.txt"
    ATTN_SERIAL=$sv ATTN_CASE=$c timeout 60 "$BIN/cuda_attn_lt_bench" "$OUT/attn-${c//:/-}-s$sv.json" x > "$f" 2>&1
    echo "serial=$sv $c rc=$?: $(grep -E '^decode_attention|error' "$f" | head -1 | sed 's/  */ /g' | cut -c1-140)"
  done
done

BOX=${BENCH_S:-$((540 - (SECONDS - START)))}
[ "$BOX" -ge 60 ] || BOX=60
echo "== deepinfer bench, before / after (box $BOX s)"
F4="--synthetic v4-flash:4"
EP="--synthetic v4-flash-ep8 --batch 256 --gen-len 4 --fill-state"
export BENCH_CONFIGS="${BENCH_CONFIGS:-$(ab_pairs "ep256c4k $EP --prompt-len 4096
p8k $F4 --batch 1 --prompt-len 8192 --gen-len 2
b1 $F4 --batch 1 --prompt-len 4096 --gen-len 16 --fill-state
b256 $F4 --batch 256 --prompt-len 4096 --gen-len 8 --fill-state
ep256c32k $EP --prompt-len 32768")}"
run_benches "$BIN/deepinfer" "$BOX"
plan_finish
echo "tests rc=${TEST_RC:-?} sanitizer rc=${SAN_RC:-?} ($((SECONDS - START)) s)"
