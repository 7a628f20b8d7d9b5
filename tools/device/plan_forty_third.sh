#!/usr/bin/env bash
# The next slice's first call (pending: tools/device/pending/forty-second-gemv-two-columns.patch,
# written 2026-12-07 ~19:55 UTC, not run): bf16_gemv with two output columns a warp from 3 rows, so
# each x load from L1 meets two weight rows (at 8 rows and one column a warp the head's x reads,
# ~8.5 GB from L1, outlasted its 1.06 GB from DRAM: the head on the GEMV at batch 8 was 12% slower
# than cuBLASLt's on the H200). Same sums (each column's order does not depend on the columns a
# warp or M). Tests first (the GEMV incl. an odd N at 8 rows; model, synthetic, engine), then this
# build against the one without the patch (deepinfer-before) at batch 1 / 4 / 8, default and with
# the head on the GEMV (--bf16-gemv-max-n 200000: rows *h). If b4h / b8h beat b4 / b8, raise
# kBf16GemvAnyNRows (forward_slots.h) to the widest batch that gains and land both.
# Build here: deepinfer-before = HEAD's build in /tmp/before; git apply the patch; ninja; tools/device/pack_bins.sh
#   build/tools/deepinfer/deepinfer build/tests/cuda/{cuda_model_ops_test,cuda_v4_model_test,cuda_v4_synthetic_test,
#   cuda_v4_engine_test} /tmp/before/deepinfer-before; run(carry=[".device-bin.tar.xz"], timeout_s=420,
#   command="tar xJf .device-bin.tar.xz && tools/device/plan_forty_third.sh")
set -uo pipefail
source "$(dirname "$0")/loops.sh"
plan_start
run_test_specs "20:cuda_model_ops_test:*Bf16*" 60:cuda_v4_model_test 25:cuda_v4_synthetic_test 80:cuda_v4_engine_test
echo "tests rc=${TEST_RC:-?} ($((SECONDS - START)) s)"
grep -h "bf16_gemv M" "$OUT/test-cuda_model_ops_test.txt"
f4="--synthetic v4-flash:4 --gen-len 8 --fill-state --prompt-len 4096"
export BENCH_CONFIGS="$(decode_ab_configs "b1 b4 b8 b8b")
$(ab_sets before "b4h $f4 --batch 4 --bf16-gemv-max-n 200000
b8h $f4 --batch 8 --bf16-gemv-max-n 200000
b8hb $f4 --batch 8 --bf16-gemv-max-n 200000")"
run_benches "$BIN/deepinfer" 150 | grep -E "rc=[1-9]" | cut -c1-150
bench_device_ms
plan_finish
echo "done ($((SECONDS - START)) s)"
