#!/usr/bin/env bash
# The twentieth slice's device call: the wgmma decode attention kernel with its finish through
# shared memory and a branch-free softmax. Why: Nsight Compute over the kernel (H100, batch 256 at
# context 512) found 45% of the warps' stall cycles waiting for instruction fetch; the kernel was
# 189 KB of SASS, most of it the unrolled finish (64 stores with a division each, a sincos on the
# tail, per thread), and each of the softmax's 32 exps sat behind a branch. Now 42 KB.
#   1. the CUDA tests that run the kernel (attention parity, the V4 model, synthetic, engine);
#   1b. memcheck and racecheck over the attention parity test (the finish's shared memory);
#   2. the attention op bench (mma.sync and wgmma rows);
#   3. Nsight Compute's full sections over the kernel at the EP step's shape;
#   4. the EP batch-256 step and the 8k prefill, this build and the base (before-*) in turn.
# Run from the repository root on the GPU machine after `tar xJf .device-bin.tar.xz`
# (tools/device/pack_bins.sh: deepinfer, deepinfer-before, the tests, cuda_attn_lt_bench):
#   run(carry=[".device-bin.tar.xz"], command="tar xJf .device-bin.tar.xz && GIT_REV=<rev> tools/device/plan_twentieth.sh")
set -uo pipefail
source "$(dirname "$0")/loops.sh"
plan_start

echo "== tests (box ${TESTS_S:-150} s)"
# shellcheck disable=SC2086
run_tests "$BIN" "${TESTS_S:-150}" ${TESTS:-cuda_attn_lt_test cuda_v4_synthetic_test cuda_v4_model_test cuda_v4_engine_test}

if [ "${SAN_S:-60}" -gt 0 ]; then
  echo "== compute-sanitizer over the attention tests (box ${SAN_S:-60} s)"
  run_sanitized "$BIN" "${SAN_S:-60}" "memcheck:cuda_attn_lt_test:CudaAttention.DecodeMatchesReference" \
    "racecheck:cuda_attn_lt_test:CudaAttention.DecodeMatchesReference"
fi

echo "== attention op bench (box ${ATTN_S:-40} s)"
SKIP_LT=1 timeout "${ATTN_S:-40}" "$BIN/cuda_attn_lt_bench" "$FINAL/attn-bench.json" "${GIT_REV:-unknown}" \
  > "$FINAL/attn-bench.txt" 2>&1
echo "rc=$?"; grep -E "decode_attention|ceiling" "$FINAL/attn-bench.txt" | cut -c1-160 | head -12

NCU=$(command -v ncu || ls /usr/local/cuda*/bin/ncu /opt/nvidia/nsight-compute/*/ncu 2>/dev/null | head -1)
if [ -n "$NCU" ] && [ "${NCU_S:-60}" -gt 0 ]; then
  echo "== ncu ($NCU): the wgmma kernel at the EP step's shape (box ${NCU_S:-60} s)"
  ATTN_CASE=256:128:256 timeout "${NCU_S:-60}" "$NCU" --clock-control none -k regex:attn_wgmma -c 1 --set full \
    "$BIN/cuda_attn_lt_bench" /tmp/ncu-bench.json x > "$OUT/ncu-attn.txt" 2>&1
  echo "ncu rc=$?"
  grep -E "Duration|Throughput|Registers|Warp Cycles|Eligible|Issued Warp|Executed Instructions|stalled|Achieved Occ" \
    "$OUT/ncu-attn.txt" | sed 's/  */ /g' | cut -c1-150 | head -40
  gzip -c "$OUT/ncu-attn.txt" > "$FINAL/ncu-attn.txt.gz"
fi

echo "== deepinfer bench (box ${BENCH_S:-130} s)"
F4="--synthetic v4-flash:4"
EP="--synthetic v4-flash-ep8 --batch 256 --prompt-len 512 --gen-len 4"
export BENCH_CONFIGS="${BENCH_CONFIGS:-ep256 $EP
before-ep256 $EP
p8k $F4 --batch 1 --prompt-len 8192 --gen-len 4
before-p8k $F4 --batch 1 --prompt-len 8192 --gen-len 4}"
run_benches "$BIN/deepinfer" "${BENCH_S:-130}"
cp "$OUT"/bench-*.json "$FINAL/" 2>/dev/null
tar czf "$FINAL/logs.tgz" -C "$OUT" .
echo "tests rc=${TEST_RC:-?}"
