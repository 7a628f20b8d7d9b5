#!/usr/bin/env bash
# Ran on an H100 at 08:11 on 2026-12-07 (741e6ef + the head change, since landed): every test
# passed; device ms before / nf / fused: b1 1.179 / 1.172 / 1.160, b8 1.900 / 1.895 / 1.868,
# b16 2.490 / - / 2.470; bench/results/h100-thirty-seventh-b-post-partials.json.
# The thirty-seventh slice's second call (2026-12-07): the first (plan_thirty_seventh.sh, H100,
# 07:45) measured the decode linears' pre-wait L2 prefetch slower (b1 device 1.170 -> 1.204 ms,
# b8 1.902 -> 1.923, b32 3.478 -> 3.495) and the mHC post making the next hc_pre's partials faster
# on top of it (b1 1.204 -> 1.190, b8 1.923 -> 1.900). This build: the prefetch removed; the fused
# post kept, and after the last layer of a decode-only batch it makes the head's hc_pre partials
# too (the head reads X's rows in place: no copy into its own buffer).
# - tests: the fused post against the post then hc_pre (bitwise), the model's GPU-vs-CPU tests, the
#   synthetic model's (HcPostPartialsChangeNoBits: knob on against off, bitwise), the engine's;
# - the model: v4-flash-4 decode ctx 4k at batch 1 (twice), 8 and 16: the build before
#   (deepinfer-before, 25e9d31), this build with `--no-hc-post-partial` ("nf") and without.
# Build (here): ninja -C build; tools/device/pack_bins.sh build/tools/deepinfer/deepinfer
#   build/tests/cuda/{cuda_layer_ops_test,cuda_v4_model_test,cuda_v4_synthetic_test,cuda_v4_engine_test}
#   DIR/deepinfer-before
#   run(carry=[".device-bin.tar.xz"], timeout_s=400, command="tar xJf .device-bin.tar.xz &&
#       tools/device/plan_thirty_seventh_b.sh")
set -uo pipefail
source "$(dirname "$0")/loops.sh"
plan_start
run_test_specs 40:cuda_layer_ops_test:*Hc*:*MoeCombine* 80:cuda_v4_model_test 90:cuda_v4_synthetic_test \
  70:cuda_v4_engine_test
echo "tests rc=${TEST_RC:-?} ($((SECONDS - START)) s)"
f4="--synthetic v4-flash:4 --gen-len 8 --fill-state --prompt-len 4096"
nf="--no-hc-post-partial"
export BENCH_CONFIGS="before-b1 $f4 --batch 1
nf-b1 $f4 --batch 1 $nf
b1 $f4 --batch 1
before-b8 $f4 --batch 8
nf-b8 $f4 --batch 8 $nf
b8 $f4 --batch 8
before-b16 $f4 --batch 16
b16 $f4 --batch 16
before-b1b $f4 --batch 1
b1b $f4 --batch 1"
run_benches "$BIN/deepinfer" 150 | grep -E "rc=|^decode " | cut -c1-150
plan_finish
echo "done ($((SECONDS - START)) s)"
