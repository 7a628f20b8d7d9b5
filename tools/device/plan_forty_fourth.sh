#!/usr/bin/env bash
# The forty-fourth slice's first call, five builds A/B in one call (each adds one change to the one above):
#   deepinfer-base: e04bd48 (the forty-third slice's end);
#   deepinfer-c:    + the pending forty-third-wgmma-fp32-x.patch (cuda::fp8_linear_wgmma_f32: wo_b
#                   and the shared expert's w2 at 1-16 rows quantise x as they stage it, no
#                   quantisation launch before them);
#   deepinfer-e:    + the embedding written straight into X's hc_mult streams (embed_rows' copies;
#                   the expand launch and its fp32 buffer gone: the b1 timeline had 8.1 us idle
#                   between the embedding and the expansion at the graph's start);
#   deepinfer-n:    + wq_b at 1-16 rows takes qa and q_norm in its own launch (fp8_linear_wgmma_f32's
#                   norm, rms_norm_pack's bits; the b1 timeline: the norm ends 5 us after wq_a, on
#                   the q path); q_norm runs only for the indexer queries, on their lane;
#   deepinfer:      + hash layers at decode: experts (from the ids) and groups on lane 1 while hc_pre
#                   runs, the weights on lane 2 joined before the combine (the b1 timeline: route +
#                   groups end ~11 us after hc_pre's finish in each hash layer, before w13).
# Tests on the last build (the new bitwise wgmma test, the embedding's rows, model, synthetic,
# engine), decode A/B at batch 1 / 2 / 4 / 8, its batch-1 timeline, and the 8k prefill by part
# (`--profile`, each part beside its floor) to pick the prefill work.
# Build here: tools/device/pack_bins.sh build/tools/deepinfer/deepinfer
#   build/tests/cuda/{cuda_ops_test,cuda_model_ops_test,cuda_layer_ops_test,cuda_v4_model_test,cuda_v4_synthetic_test,cuda_v4_engine_test,libkernel_trace.so}
#   /tmp/before/deepinfer-{base,c,e,n}; run(carry=[".device-bin.tar.xz"], timeout_s=400,
#   command="tar xJf .device-bin.tar.xz && tools/device/plan_forty_fourth.sh")
set -uo pipefail
source "$(dirname "$0")/loops.sh"
plan_start
run_test_specs "20:cuda_ops_test:*Fp8Wgmma*" "15:cuda_model_ops_test:*Embed*" "15:cuda_layer_ops_test:*HashRoute*" \
  60:cuda_v4_model_test \
  25:cuda_v4_synthetic_test 80:cuda_v4_engine_test
echo "tests rc=${TEST_RC:-?} ($((SECONDS - START)) s)"
echo "fp32-x wgmma cases bitwise: $(grep -h "fp8 wgmma fp32 x" "$OUT/test-cuda_ops_test.txt" | grep -c 'yes$') of $(grep -ch "fp8 wgmma fp32 x" "$OUT/test-cuda_ops_test.txt")"
grep -h "fp8 wgmma fp32 x" "$OUT/test-cuda_ops_test.txt" | grep "NO$" | head -6
grep -h "^embed_rows" "$OUT/test-cuda_model_ops_test.txt" | head -8
f4="--synthetic v4-flash:4 --gen-len 8 --fill-state --prompt-len 4096"
export BENCH_CONFIGS="$(decode_ab_configs "b1 b2 b4 b8" "base c e n")
p8kprof --synthetic v4-flash:4 --batch 1 --prompt-len 8192 --gen-len 4 --profile"
run_benches "$BIN/deepinfer" 130 | grep -E "rc=[1-9]" | cut -c1-150
bench_device_ms
grep -E "^prefill|by part|^  " "$OUT/bench-p8kprof.txt" | cut -c1-130 | head -40
# shellcheck disable=SC2086
kernel_timeline_of b1 30 $f4 --batch 1
head -12 "$FINAL/timeline-b1.txt" | tail -11
plan_finish
echo "done ($((SECONDS - START)) s)"
