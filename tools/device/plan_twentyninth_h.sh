#!/usr/bin/env bash
# RAN on an H100 2026-12-06 10:21 UTC: tests passed, landed (device time within the spread). The twenty-ninth slice, last call: the MoE norm's packed FP8 form asked for the fused shared
# linear's n (2 I, sh_w13) instead of I: at 33-64 rows an N of 4096 takes cuBLASLt
# (kWgmmaLtN), whose transposed scales the packed form then has, so the linear no longer
# re-quantises its input. Tests, then the A / B against 3d82209's build (deepinfer-before) at
# batch 48 / 64 (and 32, where nothing changes).
# Build (here): /tmp/deepinfer-before = 3d82209's; ninja -C build deepinfer cuda_v4_model_test
#   cuda_v4_synthetic_test; tools/device/pack_bins.sh build/tools/deepinfer/deepinfer
#   /tmp/deepinfer-before build/tests/cuda/{cuda_v4_model_test,cuda_v4_synthetic_test}
set -uo pipefail
source "$(dirname "$0")/loops.sh"
plan_start

echo "== tests"
run_test_specs 60:cuda_v4_model_test 50:cuda_v4_synthetic_test
F4="--synthetic v4-flash:4 --gen-len 8 --fill-state --prompt-len 4096"
export BENCH_CONFIGS="${BENCH_CONFIGS:-$(ab_pairs "b48 $F4 --batch 48
b64 $F4 --batch 64
b32 $F4 --batch 32")}"
run_benches "$BIN/deepinfer" "${BENCH_S:-60}" | grep -E "rc=|^decode |^decode step parts" | cut -c1-150
tar czf "$FINAL/runs.tgz" -C "$OUT" .
echo "tests rc=${TEST_RC:-?} ($((SECONDS - START)) s)"
