#!/usr/bin/env bash
# The forty-third slice's first call: the two pending patches (tools/device/pending/, written
# 2026-12-07 ~19:55-20:05 UTC, not run) and this session's change, A/B in one call:
# (1) forty-second-gemv-two-columns.patch: bf16_gemv with two output columns a warp from 3 rows, so
#     each x load from L1 meets two weight rows (at 8 rows and one column a warp the head's x reads,
#     ~8.5 GB from L1, outlasted its 1.06 GB from DRAM: the head on the GEMV at batch 8 was 12%
#     slower than cuBLASLt's on the H200). Same sums (a column's order does not depend on C or M).
# (2) forty-second-head-norm-in-hc-pre.patch: the final norm (and the head's bf16 / FP8 rows) in the
#     head's hc_pre launch (dc::HcNormPack, as every sub-layer already does; rms_norm_pack's bits):
#     one launch less before the head.
# (3) this session: the decode attention's merge writes wo_a's e4m3 input (DecodeAttnArgs::out_q8 /
#     out_qs; quantize_act_fp8's bits): no quantisation launch between the merge and wo_a (~2 us a
#     layer idle at batch 1 in the forty-second slice's timelines).
# Builds: before = HEAD, gemv2 = + (1), headnorm = + (1) + (2), this build = + (1) + (2) + (3).
# Land (1) if b4h / b8h beat b4 / b8 (then raise kBf16GemvAnyNRows in forward_slots.h to the widest
# batch that gains), (2) if headnorm beats gemv2, (3) if this build beats headnorm.
# Build here: deepinfer-before = HEAD's build, then each patch applied and built in turn, copies in
#   /tmp/before; tools/device/pack_bins.sh build/tools/deepinfer/deepinfer build/tests/cuda/{cuda_attn_lt_test,
#   cuda_model_ops_test,cuda_v4_model_test,cuda_v4_synthetic_test,cuda_v4_engine_test,libkernel_trace.so} /tmp/before/deepinfer-{before,gemv2,headnorm};
#   run(carry=[".device-bin.tar.xz"], timeout_s=540, command="tar xJf .device-bin.tar.xz && tools/device/plan_forty_third.sh")
set -uo pipefail
source "$(dirname "$0")/loops.sh"
plan_start
run_test_specs "20:cuda_attn_lt_test:*Quantised*:*HeadsPerBlock*:*DecodeMatches*:*BatchInvariant*" \
  "20:cuda_model_ops_test:*Bf16*" 60:cuda_v4_model_test 25:cuda_v4_synthetic_test 80:cuda_v4_engine_test
echo "tests rc=${TEST_RC:-?} ($((SECONDS - START)) s)"
grep -h "bf16_gemv M" "$OUT/test-cuda_model_ops_test.txt"
f4="--synthetic v4-flash:4 --gen-len 8 --fill-state --prompt-len 4096"
export BENCH_CONFIGS="$(decode_ab_configs "b1 b2 b8 b1b b8b" "before gemv2 headnorm")
$(ab_sets "before gemv2" "b4 $f4 --batch 4
b4h $f4 --batch 4 --bf16-gemv-max-n 200000
b8h $f4 --batch 8 --bf16-gemv-max-n 200000
b8hb $f4 --batch 8 --bf16-gemv-max-n 200000")"
run_benches "$BIN/deepinfer" 240 | grep -E "rc=[1-9]" | cut -c1-150
bench_device_ms
KERNEL_TRACE_OUT="$OUT/trace-b1.csv" LD_PRELOAD="$PWD/$BIN/libkernel_trace.so" timeout 40 "$BIN/deepinfer" bench \
  --device cuda $f4 --batch 1 > "$OUT/trace-bench-b1.txt" 2>&1
python3 tools/device/kernel_timeline.py "$OUT/trace-b1.csv" > "$FINAL/timeline-b1.txt" 2>&1
head -1 "$FINAL/timeline-b1.txt"; grep -E "attn_combine|quant_act_kernel<true" "$FINAL/timeline-b1.txt" | head -8
gzip -f "$OUT"/trace-b*.csv
plan_finish
echo "done ($((SECONDS - START)) s)"
