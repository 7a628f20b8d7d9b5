#!/usr/bin/env bash
# The forty-second slice's first call: (1) the forty-first's pending GEMV for decode's few-row bf16
# linears (cuda::bf16_gemv: the compressors' wkv + wgate, the indexer's head weights; each warp's
# weight row in registers, loaded before the PDL wait) and (2) the embedding written straight into
# mHC's n streams (embed_rows' copies: no expand_streams launch; the timeline's 8 us idle gap after
# the embedding sat between the two) and (3) the greedy sampler's partial argmax loading a thread's
# logits together (6.4 us at batch 1 in the timeline), (4) hash-routed layers' experts and weights in
# one launch from only their k logits (hash_route_direct: the router's 256 logits and hash_route
# were two launches, ~11 us of batch 1's path in each of v4-flash-4's three hash layers). A/B in one
# call: before = 036d8af, gemv = + (1), embed = + (1) + (2) + (3) (the timeline shows (2) and (3)
# apart), this build = + (1)-(4); then the head on the GEMV too
# (--bf16-gemv-max-n 200000) and this build's b1 / b8 timelines. Tests first: the GEMV against a
# float64 dot and each row alone, the embedding's copies, the sampler, the direct hash route against
# the two launches (bitwise); model, synthetic, engine.
# Build here: deepinfer-before (036d8af) and deepinfer-gemv (+ the patch) in /tmp/before; ninja; tools/device/pack_bins.sh
#   build/tools/deepinfer/deepinfer build/tests/cuda/{cuda_model_ops_test,cuda_v4_model_test,cuda_v4_synthetic_test,
#   cuda_v4_engine_test,cuda_sampling_test,cuda_layer_ops_test,libkernel_trace.so} /tmp/before/deepinfer-{before,gemv,embed}; run(carry=[".device-bin.tar.xz"],
#   timeout_s=590, command="tar xJf .device-bin.tar.xz && tools/device/plan_forty_second.sh")
set -uo pipefail
source "$(dirname "$0")/loops.sh"
plan_start
run_test_specs "20:cuda_model_ops_test:*Bf16*:*Embed*" 25:cuda_sampling_test "20:cuda_layer_ops_test:*Route*" 60:cuda_v4_model_test 25:cuda_v4_synthetic_test 80:cuda_v4_engine_test
echo "tests rc=${TEST_RC:-?} ($((SECONDS - START)) s)"
grep -h "bf16_gemv M\|embed_rows\|hash_route_direct" "$OUT"/test-cuda_{model,layer}_ops_test.txt | head -16
f4="--synthetic v4-flash:4 --gen-len 8 --fill-state --prompt-len 4096"
export BENCH_CONFIGS="$(decode_ab_configs "b1 b8 ep256 b1b b8b" "before gemv embed")
b1h $f4 --batch 1 --bf16-gemv-max-n 200000
b8h $f4 --batch 8 --bf16-gemv-max-n 200000"
run_benches "$BIN/deepinfer" 270 | grep -E "rc=[1-9]" | cut -c1-150
bench_device_ms
for b in 1 8; do
  KERNEL_TRACE_OUT="$OUT/trace-b$b.csv" LD_PRELOAD="$PWD/$BIN/libkernel_trace.so" timeout 40 "$BIN/deepinfer" bench \
    --device cuda $f4 --batch $b > "$OUT/trace-bench-b$b.txt" 2>&1
  python3 tools/device/kernel_timeline.py "$OUT/trace-b$b.csv" > "$FINAL/timeline-b$b.txt" 2>&1
  head -1 "$FINAL/timeline-b$b.txt"; sed -n 4,8p "$FINAL/timeline-b$b.txt"; tail -1 "$FINAL/timeline-b$b.txt" | cut -c1-160
done
gzip -f "$OUT"/trace-b*.csv
plan_finish
echo "done ($((SECONDS - START)) s)"
