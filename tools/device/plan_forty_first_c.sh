#!/usr/bin/env bash
# The forty-first slice's third call: the compressors' wkv and wgate as one weight (wkvg, rows
# [wkv; wgate]) so that a decode step's compressor lane runs one bf16 GEMM (kv and gate in each
# output row, CompressorStepArgs::row_stride = 2 cw) where it ran two (each a cuBLASLt split-K GEMM
# and its reduction). The second call's timeline had that lane on the critical path of every
# compressed layer at batch 1 (the HCA layer's attention waited ~12 us for it, the CSA layer's
# indexer for the indexer-key compressor). Tests (the compressor with kv and gate in one buffer;
# model, synthetic, engine), then A/B against ea2b32a (deepinfer-before) in the same call, then the
# new build's batch-1 timeline.
# Build here: deepinfer-before = build of ea2b32a; then this change; ninja; tools/device/pack_bins.sh
#   build/tools/deepinfer/deepinfer build/tests/cuda/{cuda_compress_test,cuda_v4_model_test,
#   cuda_v4_synthetic_test,cuda_v4_engine_test,libkernel_trace.so} /tmp/before/deepinfer-before;
#   run(carry=[".device-bin.tar.xz"], timeout_s=400, command="tar xJf .device-bin.tar.xz && tools/device/plan_forty_first_c.sh")
set -uo pipefail
source "$(dirname "$0")/loops.sh"
plan_start
run_test_specs "40:cuda_compress_test:*Decode*:*Prefill*:*Rejects*" 60:cuda_v4_model_test 45:cuda_v4_synthetic_test \
  60:cuda_v4_engine_test
echo "tests rc=${TEST_RC:-?} ($((SECONDS - START)) s)"
f4="--synthetic v4-flash:4 --gen-len 8 --fill-state --prompt-len 4096"
export BENCH_CONFIGS="$(decode_ab_configs "b1 b8 ep256 b1b b2 b8b b32 b1c")"
run_benches "$BIN/deepinfer" 150 | grep -E "rc=[1-9]" | cut -c1-150
bench_device_ms
echo "benches done ($((SECONDS - START)) s)"
KERNEL_TRACE_OUT="$OUT/trace-b1.csv" LD_PRELOAD="$PWD/$BIN/libkernel_trace.so" timeout 40 "$BIN/deepinfer" bench \
  --device cuda $f4 --batch 1 > "$OUT/trace-bench-b1.txt" 2>&1
python3 tools/device/kernel_timeline.py "$OUT/trace-b1.csv" > "$FINAL/timeline-b1.txt" 2>&1
head -1 "$FINAL/timeline-b1.txt"
gzip -f "$OUT"/trace-b1.csv
plan_finish
echo "done ($((SECONDS - START)) s)"
