#!/usr/bin/env bash
# The next session's first device call (written 2026-12-05 evening with the device budget spent):
#   1. tools/device/pending/twentysecond-hc-ws-token-major.patch (applied and built first): mHC
#      pre's chunk partials token-major where hc_finish_kernel sums them (below 1,025 tokens), so a
#      token's 800 partials are one 3.2 KB run instead of 800 scattered sectors, re-read by each of
#      its 4 column blocks (hc_finish 11.7 us at 256 tokens, twice a layer). Same sums in the same
#      order: the mHC tests (bitwise row invariance at 1, 7, 40, 300, 4100 rows, CPU parity) and the
#      V4 model / synthetic tests; then the EP batch-256 step with and without (before-*).
#   2. Why the step's largest kernels wait: Nsight Compute's full set (stall reasons per issued
#      instruction: tools/device/ncu_stalls.py; per-instruction samples in the source page) for the
#      FP8 expert kernels at the EP shape (w13 154 us and w2 76 us a layer, 1.6x their bytes; 1.1
#      eligible warps per scheduler), the wgmma attention at the EP shape (72 us, half of it a
#      block's fixed cost), the 256-row FP8 wgmma linear (the grouped wo_a, 44 us, 440 TFLOP/s) and
#      the step's mHC / router kernels.
#   Also twentysecond-linear-lt-packed.patch (host code: Forward::linear's cuBLASLt call through
#   linear_lt_packed, the same five lines it held twice; same calls), covered by the V4 tests.
# Build (here): cp build/tools/deepinfer/deepinfer /tmp/deepinfer-before; git apply both patches;
#   ninja -C build deepinfer cuda_layer_ops_test cuda_v4_model_test cuda_v4_synthetic_test cuda_v4_engine_test \
#     cuda_ops_bench cuda_attn_lt_bench
#   T=build/tests/cuda; tools/device/pack_bins.sh build/tools/deepinfer/deepinfer /tmp/deepinfer-before \
#     $T/cuda_layer_ops_test $T/cuda_v4_model_test $T/cuda_v4_synthetic_test $T/cuda_v4_engine_test \
#     $T/cuda_ops_bench $T/cuda_attn_lt_bench
#   run(carry=[".device-bin.tar.xz"], timeout_s=590,
#       command="tar xJf .device-bin.tar.xz && GIT_REV=<rev> tools/device/plan_twentysecond.sh")
set -uo pipefail
source "$(dirname "$0")/loops.sh"
plan_start

echo "== tests"
GTEST_FILTER='CudaLayerOps.Hc*' run_tests "$BIN" "${KTESTS_S:-30}" cuda_layer_ops_test
KRC=$TEST_RC
run_tests "$BIN" "${TESTS_S:-130}" cuda_v4_model_test cuda_v4_synthetic_test cuda_v4_engine_test
[ "$KRC" = 0 ] || TEST_RC=1

echo "== deepinfer bench (box ${BENCH_S:-90} s)"
EP="--synthetic v4-flash-ep8 --batch 256 --prompt-len 512 --gen-len 4"
export BENCH_CONFIGS="${BENCH_CONFIGS:-ep256 $EP
before-ep256 $EP}"
run_benches "$BIN/deepinfer" "${BENCH_S:-90}"

NCU=$(command -v ncu || ls /usr/local/cuda*/bin/ncu /opt/nvidia/nsight-compute/*/ncu 2>/dev/null | head -1)
# stall_profile NAME REGEX COUNT CMD...: the full set over the first COUNT kernels matching REGEX.
stall_profile() {
  local name=$1 regex=$2 count=$3 left
  shift 3
  left=$((${TOTAL_S:-560} - (SECONDS - START)))
  [ "$left" -gt 30 ] || { echo "$name: skipped (time spent)"; return; }
  echo "== ncu full set: $name (box $left s)"
  timeout "$left" "$NCU" --set full --import-source yes -k "regex:$regex" -c "$count" -f -o "$OUT/rep-$name" "$@" \
    > "$OUT/ncu-$name.log" 2>&1
  echo "rc=$?"
  "$NCU" --import "$OUT/rep-$name.ncu-rep" --page raw --csv > "$OUT/raw-$name.csv" 2>/dev/null &&
    python3 tools/device/ncu_stalls.py "$OUT/raw-$name.csv" 8
  "$NCU" --import "$OUT/rep-$name.ncu-rep" --page source --csv --print-source sass > "$OUT/src-$name.csv" 2>/dev/null ||
    echo "(no source page)"
  gzip -f "$OUT/src-$name.csv" "$OUT/raw-$name.csv" 2>/dev/null
}
if [ -n "$NCU" ]; then
  stall_profile experts mxfp4_fp8_kernel 2 "$BIN/cuda_ops_bench" /tmp/o.json x moe:32:48
  ATTN_CASE=256:128:256 stall_profile attention attn_wgmma 1 "$BIN/cuda_attn_lt_bench" /tmp/a.json x
  stall_profile wgmma256 fp8_wgmma_kernel 1 "$BIN/cuda_ops_bench" /tmp/o.json x fp8paths:1024:4096:8:256
  # shellcheck disable=SC2086
  stall_profile step 'hc_partial|hc_finish|router_logits|rows_fp8' 4 --profile-from-start off \
    "$BIN/deepinfer" bench --device cuda $EP
else
  echo "no ncu"
fi
plan_finish
cp "$OUT"/raw-*.csv.gz "$FINAL/" 2>/dev/null
echo "tests rc=${TEST_RC:-?}"
