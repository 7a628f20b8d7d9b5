#!/usr/bin/env bash
# The forty-third slice's third call: fp32 x straight into the wgmma decode linear
# (cuda::fp8_linear_wgmma_f32: each block quantises the K blocks it stages, quantize_act_fp8's
# bits), so wo_b and the shared expert's w2 at 1-16 rows have no quantisation launch before them
# (the slice's batch-1 timeline: wo_a -> quantisation -> wo_b, the quantisation ending ~3.9 us
# after wo_a). Tests first (the new bitwise test, the wgmma linear against the CPU, model,
# synthetic, engine), then this build against the tree without it (deepinfer-base) at batch 1, 2, 4, 8, and
# this build's batch-1 timeline.
# Written 2026-12-07 ~22:30 UTC as tools/device/pending/forty-third-wgmma-fp32-x.patch (the
# session's device time ran out before this call); built and ptxas-checked there (NW = 16: 62 -> 76
# registers, no spills; the other widths unchanged), never run.
# Build here: deepinfer-base = the tree without the patch, built, in /tmp/before; git apply the patch; ninja; tools/device/pack_bins.sh build/tools/deepinfer/deepinfer
#   build/tests/cuda/{cuda_ops_test,cuda_v4_model_test,cuda_v4_synthetic_test,cuda_v4_engine_test,libkernel_trace.so}
#   /tmp/before/deepinfer-base; run(carry=[".device-bin.tar.xz"], timeout_s=290,
#   command="tar xJf .device-bin.tar.xz && tools/device/plan_forty_third_c.sh")
set -uo pipefail
source "$(dirname "$0")/loops.sh"
plan_start
run_test_specs "20:cuda_ops_test:*Fp8Wgmma*" 60:cuda_v4_model_test 25:cuda_v4_synthetic_test 80:cuda_v4_engine_test
echo "tests rc=${TEST_RC:-?} ($((SECONDS - START)) s)"
grep -h "fp8 wgmma fp32 x" "$OUT/test-cuda_ops_test.txt" | head -20
f4="--synthetic v4-flash:4 --gen-len 8 --fill-state --prompt-len 4096"
export BENCH_CONFIGS="$(decode_ab_configs "b1 b2 b4 b8 b1b b8b" "base")"
run_benches "$BIN/deepinfer" 80 | grep -E "rc=[1-9]" | cut -c1-150
bench_device_ms
KERNEL_TRACE_OUT="$OUT/trace-b1.csv" LD_PRELOAD="$PWD/$BIN/libkernel_trace.so" timeout 30 "$BIN/deepinfer" bench \
  --device cuda $f4 --batch 1 > "$OUT/trace-bench-b1.txt" 2>&1
python3 tools/device/kernel_timeline.py "$OUT/trace-b1.csv" > "$FINAL/timeline-b1.txt" 2>&1
head -1 "$FINAL/timeline-b1.txt"
gzip -f "$OUT"/trace-b*.csv
plan_finish
echo "done ($((SECONDS - START)) s)"
