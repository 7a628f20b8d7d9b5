#!/usr/bin/env bash
# The thirty-ninth slice's third call (2026-12-07 ~11:15 UTC): the decode attention's default base
# split by the launch (dc::decode_base_split: 64 rows where batch x splits of 256 < SMs / 8; the
# second call's sweep: 64 for every launch gained at batches 1-4, lost 0.5% at 8) and the FP8
# experts' K split knob (--moe-split-k: the w13-only rule at batch 1 against never, and forced at
# batches 2-8, where the blocks pass one wave: 1,440 at batch 8's w13 over 264 slots, ~1.10x bytes).
# - tests: attention (the base split's test), the FP8 experts, model / synthetic / engine;
# - A/B against the build without the slice (deepinfer-before) at batch 1 (twice), 2, 4, 8, 16, 32.
# Build (here): ninja -C build; tools/device/pack_bins.sh build/tools/deepinfer/deepinfer
#   build/tests/cuda/{cuda_attn_lt_test,cuda_experts_test,cuda_v4_model_test,cuda_v4_synthetic_test,cuda_v4_engine_test}
#   /tmp/before/deepinfer-before; run(carry=[".device-bin.tar.xz"], timeout_s=420,
#   command="tar xJf .device-bin.tar.xz && tools/device/plan_thirty_ninth_c.sh")
set -uo pipefail
source "$(dirname "$0")/loops.sh"
plan_start
run_test_specs "90:cuda_attn_lt_test:CudaAttention.*" "90:cuda_experts_test:CudaExperts.Fp8*" 80:cuda_v4_model_test \
  90:cuda_v4_synthetic_test 80:cuda_v4_engine_test
echo "tests rc=${TEST_RC:-?} ($((SECONDS - START)) s)"
f4="--synthetic v4-flash:4 --gen-len 8 --fill-state --prompt-len 4096"
export BENCH_CONFIGS="$(ab_pairs "b1 $f4 --batch 1
b2 $f4 --batch 2
b4 $f4 --batch 4
b8 $f4 --batch 8
b16 $f4 --batch 16
b32 $f4 --batch 32
b1b $f4 --batch 1")
k1-b1 $f4 --batch 1 --moe-split-k 1
k2-b2 $f4 --batch 2 --moe-split-k 2
k2-b4 $f4 --batch 4 --moe-split-k 2
k2-b8 $f4 --batch 8 --moe-split-k 2
s256-b8 $f4 --batch 8 --attn-split 256
k1-b1b $f4 --batch 1 --moe-split-k 1"
run_benches "$BIN/deepinfer" 200 | grep -E "rc=[1-9]" | cut -c1-150
bench_device_ms
plan_finish
echo "done ($((SECONDS - START)) s)"
