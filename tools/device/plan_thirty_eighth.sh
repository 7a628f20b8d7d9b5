#!/usr/bin/env bash
# The thirty-eighth slice's plan (written 2026-12-07 after the session's device time ran out; ran
# on an H100 on 2026-12-07 at 09:10 UTC, next session: tests passed, device ms b1 1.160 -> 1.154,
# b8 1.867 -> 1.865; landed): tools/device/pending/thirty-eighth-router-two-warp-blocks.patch, the decode router's logits
# in blocks of 2 warps (grid E/2 x T) instead of 8 (E/8 x T): the same per-lane order (the bits
# cannot change: RouteRowInvariance compares the decode kernel with every tile shape), the token's
# gate spread over 4x the SMs (batch 1's ncu table, thirty-seventh slice: 7.9 us for a 2 MB gate on
# 32 blocks).
# - tests: the router against the CPU and its row invariance (bitwise across tile shapes), the
#   model's GPU-vs-CPU tests, the synthetic tests;
# - the model: v4-flash-4 decode ctx 4k at batch 1 (twice) and 8, and the EP step at batch 256
#   (its router runs the staged kernel: unchanged), against the build before (deepinfer-before).
# Build (here): git apply tools/device/pending/thirty-eighth-router-two-warp-blocks.patch; ninja -C build;
#   tools/device/pack_bins.sh build/tools/deepinfer/deepinfer
#   build/tests/cuda/{cuda_layer_ops_test,cuda_v4_model_test,cuda_v4_synthetic_test} DIR/deepinfer-before
#   run(carry=[".device-bin.tar.xz"], timeout_s=300, command="tar xJf .device-bin.tar.xz &&
#       tools/device/plan_thirty_eighth.sh")
set -uo pipefail
source "$(dirname "$0")/loops.sh"
plan_start
run_test_specs 60:cuda_layer_ops_test:*Route* 80:cuda_v4_model_test 90:cuda_v4_synthetic_test
echo "tests rc=${TEST_RC:-?} ($((SECONDS - START)) s)"
f4="--synthetic v4-flash:4 --gen-len 8 --fill-state --prompt-len 4096"
export BENCH_CONFIGS="$(ab_pairs "b1 $f4 --batch 1
b8 $f4 --batch 8
b1b $f4 --batch 1")"
run_benches "$BIN/deepinfer" 120 | grep -E "rc=|^decode " | cut -c1-150
plan_finish
echo "done ($((SECONDS - START)) s)"
