#!/usr/bin/env bash
# Two latency fixes, bitwise the kernels before them (written 2026-12-06):
#   - indexer_score_kernel: each block's q (64 x 128 fp32) converted to bf16 hi / lo after all of a
#     thread's float4 loads are out (before: one scalar load per element, converted before the next:
#     a chain of L2 round trips at the head of every block; the EP step spent 71 us a CSA layer in
#     this kernel, the 8k prefill 1.9 ms, H100 ncu).
#   - attn_combine_kernel: up to 4 splits, every statistic and partial row of a thread's 4 pairs
#     loaded before the first merge (65 us a CSA layer in the EP step for ~133 MB).
# Build (here): ninja -C build deepinfer cuda_compress_test cuda_attn_lt_test cuda_attn_lt_bench
#   cuda_v4_model_test cuda_v4_synthetic_test cuda_v4_engine_test; mv .device-bin.tar.xz
#   .device-bin-before.tar.xz (the build before: f36ce26); tools/device/pack_bins.sh
#   build/tools/deepinfer/deepinfer build/tests/cuda/{cuda_compress_test,cuda_attn_lt_test,cuda_attn_lt_bench,cuda_v4_model_test,cuda_v4_synthetic_test,cuda_v4_engine_test}
#   run(carry=[".device-bin.tar.xz", ".device-bin-before.tar.xz"], timeout_s=420, command=
#     "tar xJf .device-bin-before.tar.xz && mv .device-bin/bin/deepinfer /tmp/deepinfer-before &&
#      tar xJf .device-bin.tar.xz && mv /tmp/deepinfer-before .device-bin/bin/ &&
#      GIT_REV=<rev> tools/device/plan_twentyseventh_d.sh")
set -uo pipefail
source "$(dirname "$0")/loops.sh"
plan_start

echo "== tests"
run_test_specs 60:cuda_compress_test 90:cuda_attn_lt_test:CudaAttention.* 90:cuda_v4_model_test 60:cuda_v4_synthetic_test \
  120:cuda_v4_engine_test
run_sanitized "$BIN" 80 "racecheck:cuda_compress_test:CudaCompress.Indexer*" \
  "memcheck:cuda_compress_test:CudaCompress.Indexer*" "memcheck:cuda_attn_lt_test:CudaAttention.HeadsPerBlockBitwise"

echo "== decode attention with its combine (after only; the split + combine rows of the twenty-seventh-b call are the before)"
for c in 256:512:256 128:512:256 64:512:256 256:256:256 32:512:256; do
  f="$OUT/attn-${c//:/-}.txt"
  ATTN_CASE=$c timeout 60 "$BIN/cuda_attn_lt_bench" "$OUT/attn-${c//:/-}.json" x > "$f" 2>&1
  echo "$c rc=$?: $(grep -E '^decode_attention|error' "$f" | head -1 | sed 's/  */ /g' | cut -c1-140)"
done

echo "== deepinfer bench, before / after"
F4="--synthetic v4-flash:4"
export BENCH_CONFIGS="${BENCH_CONFIGS:-$(ab_pairs "ep256c4k --synthetic v4-flash-ep8 --batch 256 --gen-len 4 --fill-state --prompt-len 4096
p8k $F4 --batch 1 --prompt-len 8192 --gen-len 2
b32 $F4 --batch 32 --prompt-len 4096 --gen-len 8 --fill-state")}"
run_benches "$BIN/deepinfer" "${BENCH_S:-220}"
plan_finish
echo "tests rc=${TEST_RC:-?} sanitizer rc=${SAN_RC:-?} ($((SECONDS - START)) s)"
