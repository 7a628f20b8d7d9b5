#!/usr/bin/env bash
# The forty-fourth slice's second call. The first (plan_forty_fourth.sh, H100) measured four
# decode-path changes in a chain: the fp32-x wgmma linear, the embedding into the streams and wq_b
# with q_norm in its launch were slower or neutral (dropped); the hash layers' early experts gained
# but began only after the attention's post (their fork sat at the MoE's start). This build
# (deepinfer) is e04bd48 + the MoE moved into forward_moe.cpp + the early hash route alone, its
# experts and groups forked before each hash layer's attention (lane 5), the weights after hc_pre
# (lane 2); deepinfer-base is e04bd48. Tests (the hash route's halves bitwise, model, synthetic,
# engine), then A/B at batch 1 / 2 / 4 / 8 (1 and 8 twice), the EP step and the 8k prefill (the
# move touches every MoE path), and this build's batch-1 timeline.
# Build here: tools/device/pack_bins.sh build/tools/deepinfer/deepinfer
#   build/tests/cuda/{cuda_layer_ops_test,cuda_v4_model_test,cuda_v4_synthetic_test,cuda_v4_engine_test,libkernel_trace.so}
#   /tmp/before/deepinfer-base; run(carry=[".device-bin.tar.xz"], timeout_s=330,
#   command="tar xJf .device-bin.tar.xz && tools/device/plan_forty_fourth_b.sh")
set -uo pipefail
source "$(dirname "$0")/loops.sh"
plan_start
run_test_specs "15:cuda_layer_ops_test:*HashRoute*" 60:cuda_v4_model_test 25:cuda_v4_synthetic_test \
  80:cuda_v4_engine_test
echo "tests rc=${TEST_RC:-?} ($((SECONDS - START)) s)"
grep -h "^hash_route_direct" "$OUT/test-cuda_layer_ops_test.txt" | head -6
f4="--synthetic v4-flash:4 --gen-len 8 --fill-state --prompt-len 4096"
export BENCH_CONFIGS="$(decode_ab_configs "b1 b2 b4 b8 b1b b8b ep256" "base")
$(ab_sets base "p8k --synthetic v4-flash:4 --batch 1 --prompt-len 8192 --gen-len 2")"
run_benches "$BIN/deepinfer" 120 | grep -E "rc=[1-9]" | cut -c1-150
bench_device_ms
# shellcheck disable=SC2086
kernel_timeline_of b1 30 $f4 --batch 1
grep -E "hash_route_direct|moe_groups|mxfp4_fp8_split|hc_finish_pack" "$FINAL/timeline-b1.txt" | head -12
plan_finish
echo "done ($((SECONDS - START)) s)"
