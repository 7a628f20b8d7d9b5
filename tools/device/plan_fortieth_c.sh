#!/usr/bin/env bash
# The fortieth slice's third call (2026-12-07 ~13:40 UTC, on 387bd71), two changes each against the
# build before it in the same call:
# - wob: wo_b's e4m3 input from wo_a's grouped wgmma launch (plan_fortieth_b.sh ran it on top of
#   the pending w13 rows patch, which was slower and is dropped; there it was neutral);
# - this tree: that and the attention's xn-only lanes forked right after hc_pre (K=V row, KV
#   compressor, indexer-key compressor, indexer head weights on a lane of their own), the indexer
#   queries' lane after q_norm, joined with the rest before the attention (no join of its own).
# Tests: the wgmma linear (the fused rows bitwise quantize_act_fp8's), model / synthetic / engine
# (prefill / decode consistency, batch invariance); A/B: before (387bd71), wob, this tree at batch
# 1 (three times), 2, 8 (twice), the EP step; ncu of a batch-1 step with what is left of the box.
# Build here: deepinfer at 387bd71 -> /tmp/before/deepinfer-before; + wo_b -> deepinfer-wob; this tree:
#   ninja -C build; tools/device/pack_bins.sh build/tools/deepinfer/deepinfer build/tests/cuda/{cuda_ops_test,
#   cuda_v4_model_test,cuda_v4_synthetic_test,cuda_v4_engine_test} /tmp/before/deepinfer-before /tmp/before/deepinfer-wob
set -uo pipefail
source "$(dirname "$0")/loops.sh"
plan_start
run_test_specs "60:cuda_ops_test:CudaOps.Fp8Wgmma*" 80:cuda_v4_model_test 90:cuda_v4_synthetic_test 80:cuda_v4_engine_test
echo "tests rc=${TEST_RC:-?} ($((SECONDS - START)) s)"
f4="--synthetic v4-flash:4 --gen-len 8 --fill-state --prompt-len 4096"
export BENCH_CONFIGS="$(decode_ab_configs "b1 b8 ep256 b1b b2 b8b b1c b32" "wob before")"
run_benches "$BIN/deepinfer" 120 | grep -E "rc=[1-9]" | cut -c1-150
bench_device_ms
ncu_step_table $((170 - (SECONDS - START))) "$f4 --batch 1" 44
plan_finish
echo "done ($((SECONDS - START)) s)"
