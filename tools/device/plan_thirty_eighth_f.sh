#!/usr/bin/env bash
# The thirty-eighth slice's sixth plan (2026-12-07, written and run the same session; ran on an H100
# at ~09:39 UTC: tests and memcheck clean; device ms b1 1.073 / 1.078 -> 1.076 / 1.075, b2 1.215 ->
# 1.212, b8 1.779 -> 1.796, EP b256 27.14 -> 26.80: dropped, the code in git history, ca78ed6): the MoE's
# expert selection in the grouping's launch (dc::MoeSelect: hash layers wherever moe_build_groups
# runs unsorted, top-k up to 8 tokens, a warp a token), one launch less a layer; the same bits
# (the selection's expressions shared, moe_select.cuh).
# - tests: SelectInGroupsBitwise (fused == hash_route / moe_route's top-k then moe_build_groups:
#   experts, weights, slot_pos, descriptors), the router and experts tests, model / synthetic /
#   engine; memcheck over the new test;
# - A/B against the kv-tail commit (deepinfer-before) at batch 1 (twice), 2, 8 and the EP
#   step at batch 256 (hash layers fused at 256 tokens).
# Build (here): pack deepinfer, deepinfer-before and the test binaries; run(carry=[".device-bin.tar.xz"],
#   timeout_s=360, command="tar xJf .device-bin.tar.xz && tools/device/plan_thirty_eighth_f.sh")
set -uo pipefail
source "$(dirname "$0")/loops.sh"
plan_start
run_test_specs "60:cuda_layer_ops_test:CudaLayerOps.Select*:CudaLayerOps.Route*" "60:cuda_experts_test" \
  80:cuda_v4_model_test 90:cuda_v4_synthetic_test 80:cuda_v4_engine_test
echo "tests rc=${TEST_RC:-?} ($((SECONDS - START)) s)"
run_sanitized "$BIN" 40 "memcheck:cuda_layer_ops_test:CudaLayerOps.SelectInGroupsBitwise"
echo "sanitizers rc=${SAN_RC:-?} ($((SECONDS - START)) s)"
f4="--synthetic v4-flash:4 --gen-len 8 --fill-state --prompt-len 4096"
export BENCH_CONFIGS="$(ab_pairs "b1 $f4 --batch 1
b2 $f4 --batch 2
b8 $f4 --batch 8
b1b $f4 --batch 1
ep256c4k --synthetic v4-flash-ep8 --batch 256 --gen-len 4 --fill-state --prompt-len 4096")"
run_benches "$BIN/deepinfer" 150 | grep -E "rc=|^decode " | cut -c1-150
bench_device_ms
plan_finish
echo "done ($((SECONDS - START)) s)"
