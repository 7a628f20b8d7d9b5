#!/usr/bin/env bash
# The next slice's first call; two pending patches (tools/device/pending/, written 2026-12-07
# ~19:55-20:05 UTC, not run):
# (1) forty-second-gemv-two-columns.patch: bf16_gemv with two output columns a warp from 3 rows, so
#     each x load from L1 meets two weight rows (at 8 rows and one column a warp the head's x reads,
#     ~8.5 GB from L1, outlasted its 1.06 GB from DRAM: the head on the GEMV at batch 8 was 12%
#     slower than cuBLASLt's on the H200). Same sums (a column's order does not depend on C or M).
# (2) forty-second-head-norm-in-hc-pre.patch: the final norm (and the head's bf16 / FP8 rows) in the
#     head's hc_pre launch (dc::HcNormPack, as every sub-layer already does; rms_norm_pack's bits):
#     one launch less before the head.
# Tests first (the GEMV incl. an odd N at 8 rows; model, synthetic, engine), then three builds:
# before = the tree without either patch, gemv2 = + (1), this build = + (1) + (2); at batch 1 / 4 / 8,
# default and with the head on the GEMV (--bf16-gemv-max-n 200000: rows *h). Land (1) if b4h / b8h
# beat b4 / b8 (then raise kBf16GemvAnyNRows in forward_slots.h to the widest batch that gains),
# (2) if this build beats gemv2.
# Build here: deepinfer-before = HEAD's build in /tmp/before; git apply (1); ninja; deepinfer -> /tmp/before/deepinfer-gemv2;
#   git apply (2); ninja; tools/device/pack_bins.sh build/tools/deepinfer/deepinfer build/tests/cuda/{cuda_model_ops_test,
#   cuda_v4_model_test,cuda_v4_synthetic_test,cuda_v4_engine_test} /tmp/before/deepinfer-{before,gemv2};
#   run(carry=[".device-bin.tar.xz"], timeout_s=480, command="tar xJf .device-bin.tar.xz && tools/device/plan_forty_third.sh")
set -uo pipefail
source "$(dirname "$0")/loops.sh"
plan_start
run_test_specs "20:cuda_model_ops_test:*Bf16*" 60:cuda_v4_model_test 25:cuda_v4_synthetic_test 80:cuda_v4_engine_test
echo "tests rc=${TEST_RC:-?} ($((SECONDS - START)) s)"
grep -h "bf16_gemv M" "$OUT/test-cuda_model_ops_test.txt"
f4="--synthetic v4-flash:4 --gen-len 8 --fill-state --prompt-len 4096"
export BENCH_CONFIGS="$(decode_ab_configs "b1 b4 b8 b1b b8b" "before gemv2")
$(ab_sets "before gemv2" "b4h $f4 --batch 4 --bf16-gemv-max-n 200000
b8h $f4 --batch 8 --bf16-gemv-max-n 200000
b8hb $f4 --batch 8 --bf16-gemv-max-n 200000")"
run_benches "$BIN/deepinfer" 200 | grep -E "rc=[1-9]" | cut -c1-150
bench_device_ms
plan_finish
echo "done ($((SECONDS - START)) s)"
