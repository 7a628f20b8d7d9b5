#!/usr/bin/env bash
# The thirty-eighth slice's fifth plan (2026-12-07, written and run the same session):
# - the K=V row's tail with its norm weight in registers before the PDL wait (its loads had waited
#   behind the ring stores: 11.9 us for one row against the query heads' 5.0, H100 ncu; with the
#   wgmma decode linears, lane 0's wkv + tail is about as long as the main lane's wq_b + q tail);
#   same bits: the fused-tail tests and the model's GPU-vs-CPU tests;
# - A/B against 028652a (deepinfer-before) at batch 1 (twice), 8;
# - the decode attention's split (--attn-split 128 / 64 against the default 256) at batch 1 and 8;
# - batch 1's step kernel by kernel (ncu), the first since the wgmma decode linears.
# Build (here): pack deepinfer, deepinfer-before and cuda_model_ops_test, cuda_v4_model_test;
#   run(carry=[".device-bin.tar.xz"], timeout_s=420, command="tar xJf .device-bin.tar.xz &&
#   tools/device/plan_thirty_eighth_e.sh")
set -uo pipefail
source "$(dirname "$0")/loops.sh"
plan_start
run_test_specs "60:cuda_model_ops_test:*NormRope*" 80:cuda_v4_model_test
echo "tests rc=${TEST_RC:-?} ($((SECONDS - START)) s)"
f4="--synthetic v4-flash:4 --gen-len 8 --fill-state --prompt-len 4096"
export BENCH_CONFIGS="$(ab_pairs "b1 $f4 --batch 1
b8 $f4 --batch 8
b1b $f4 --batch 1")
s128-b1 $f4 --batch 1 --attn-split 128
s64-b1 $f4 --batch 1 --attn-split 64
s128-b8 $f4 --batch 8 --attn-split 128
s64-b8 $f4 --batch 8 --attn-split 64"
run_benches "$BIN/deepinfer" 100 | grep -E "rc=|^decode " | cut -c1-150
bench_device_ms
ncu_step_table $((400 - (SECONDS - START))) "--synthetic v4-flash:4 --batch 1 --prompt-len 4096 --fill-state --gen-len 8" 40
plan_finish
echo "done ($((SECONDS - START)) s)"
