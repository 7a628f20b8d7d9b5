#!/usr/bin/env bash
# The forty-fourth slice's last call: the landed build as committed (the early hash route kept to
# 64 tokens, kHashEarlyMaxT; moe_hash_early skipping other layers' lookups): the V4 model,
# synthetic (batch invariance) and engine tests, then batch 1 / 8 and the EP step once each.
# Build here: tools/device/pack_bins.sh build/tools/deepinfer/deepinfer
#   build/tests/cuda/{cuda_v4_model_test,cuda_v4_synthetic_test,cuda_v4_engine_test};
#   run(carry=[".device-bin.tar.xz"], timeout_s=170, command="tar xJf .device-bin.tar.xz && tools/device/plan_forty_fourth_c.sh")
set -uo pipefail
source "$(dirname "$0")/loops.sh"
plan_start
run_test_specs 60:cuda_v4_model_test 25:cuda_v4_synthetic_test 80:cuda_v4_engine_test
echo "tests rc=${TEST_RC:-?} ($((SECONDS - START)) s)"
export BENCH_CONFIGS="$(decode_ab_configs "b1 b8 ep256" " ")"
run_benches "$BIN/deepinfer" 40 | grep -E "rc=[1-9]" | cut -c1-150
bench_device_ms
plan_finish
echo "done ($((SECONDS - START)) s)"
