#!/usr/bin/env bash
# The forty-first slice's fourth call: decode's few-row bf16 linears (the compressors' wkv + wgate,
# the indexer's head weights) on a GEMV kernel (cuda::bf16_gemv: each warp's weight row held in
# registers, loaded before the PDL wait; no cuBLASLt split-K reduction launch) instead of cuBLASLt,
# A/B against a67e8cc (deepinfer-before) in the same call, and the head on it too
# (--bf16-gemv-max-n 200000: the head's 129,280 outputs, rows *h). Tests first: the kernel against
# a float64 dot, each row's bits alone; model, synthetic, engine.
# Pending (tools/device/pending/forty-first-bf16-gemv.patch): the session that wrote it had no device
# time left. Build here: deepinfer-before = build of the tree without the patch; git apply the patch; ninja; tools/device/pack_bins.sh
#   build/tools/deepinfer/deepinfer build/tests/cuda/{cuda_model_ops_test,cuda_v4_model_test,cuda_v4_synthetic_test,
#   cuda_v4_engine_test} /tmp/before/deepinfer-before; run(carry=[".device-bin.tar.xz"], timeout_s=330,
#   command="tar xJf .device-bin.tar.xz && tools/device/plan_forty_first_d.sh")
set -uo pipefail
source "$(dirname "$0")/loops.sh"
plan_start
run_test_specs "20:cuda_model_ops_test:*Bf16*" 70:cuda_v4_model_test 25:cuda_v4_synthetic_test 75:cuda_v4_engine_test
echo "tests rc=${TEST_RC:-?} ($((SECONDS - START)) s)"
grep -h "bf16_gemv M" "$OUT/test-cuda_model_ops_test.txt"
f4="--synthetic v4-flash:4 --gen-len 8 --fill-state --prompt-len 4096"
export BENCH_CONFIGS="$(decode_ab_configs "b1 b8 ep256 b1b b2")
b1h $f4 --batch 1 --bf16-gemv-max-n 200000
b8h $f4 --batch 8 --bf16-gemv-max-n 200000"
run_benches "$BIN/deepinfer" 110 | grep -E "rc=[1-9]" | cut -c1-150
bench_device_ms
plan_finish
echo "done ($((SECONDS - START)) s)"
