#!/usr/bin/env bash
# The thirty-ninth slice's second call (2026-12-07 ~10:55 UTC): the split-K expert kernels by the
# first call's figures (w13 split at batch 1: 29.3 -> 26.2 us; w2 split: 15.4 -> 16.6, so the rule
# now needs K >= 32 chunks: w13 only), A/B at batch 1 three times against the build without the
# split; the decode attention's split size at batches 1-8 (64 / 128 / the default 256, the
# question for a rule); the 8k prefill kernel by kernel (ncu).
# Build (here): ninja -C build; tools/device/pack_bins.sh build/tools/deepinfer/deepinfer
#   build/tests/cuda/{cuda_experts_test,cuda_v4_model_test} /tmp/before/deepinfer-before;
#   run(carry=[".device-bin.tar.xz"], timeout_s=420, command="tar xJf .device-bin.tar.xz && tools/device/plan_thirty_ninth_b.sh")
set -uo pipefail
source "$(dirname "$0")/loops.sh"
plan_start
run_test_specs "90:cuda_experts_test:CudaExperts.Fp8*" 80:cuda_v4_model_test
echo "tests rc=${TEST_RC:-?} ($((SECONDS - START)) s)"
f4="--synthetic v4-flash:4 --gen-len 8 --fill-state --prompt-len 4096"
export BENCH_CONFIGS="$(ab_pairs "b1 $f4 --batch 1
b1b $f4 --batch 1
b1c $f4 --batch 1")
s64-b1 $f4 --batch 1 --attn-split 64
s128-b1 $f4 --batch 1 --attn-split 128
b2 $f4 --batch 2
s64-b2 $f4 --batch 2 --attn-split 64
s128-b2 $f4 --batch 2 --attn-split 128
b4 $f4 --batch 4
s64-b4 $f4 --batch 4 --attn-split 64
s128-b4 $f4 --batch 4 --attn-split 128
b8 $f4 --batch 8
s64-b8 $f4 --batch 8 --attn-split 64
s128-b8 $f4 --batch 8 --attn-split 128
s64-b1b $f4 --batch 1 --attn-split 64"
run_benches "$BIN/deepinfer" 150 | grep -E "rc=[1-9]" | cut -c1-150
bench_device_ms
ncu_prefill_table $((380 - (SECONDS - START))) "--synthetic v4-flash:4 --batch 1 --prompt-len 8192"
plan_finish
echo "done ($((SECONDS - START)) s)"
