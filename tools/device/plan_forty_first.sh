#!/usr/bin/env bash
# The forty-first slice's first call (2026-12-07 ~16:10 UTC), three builds: deepinfer-before (the
# session's base 9fd1c23), deepinfer-lanes (+ tools/device/pending/fortieth-c-xn-lanes.patch: the
# attention's xn-only lanes forked right after hc_pre) and deepinfer (+ the 128-wide FP8 expert
# kernel's chunks as two n64 halves, the tensor pipe fed while the other half is promoted). Tests
# first (the experts' FP8 kernels against the CPU's reference rounding, model, synthetic, engine),
# then decode before vs lanes(+halves: decode groups are <= 64 rows, unaffected), prefill 8k on all
# three, then ncu's view of the 128-row expert kernel with and without the halves.
# Build here: ninja -C build; cp build/tools/deepinfer/deepinfer /tmp/before/deepinfer-before; git apply
#   the lanes patch; ninja; cp ... /tmp/before/deepinfer-lanes; the halves change; ninja;
#   tools/device/pack_bins.sh build/tools/deepinfer/deepinfer build/tests/cuda/{cuda_experts_test,
#   cuda_v4_model_test,cuda_v4_synthetic_test,cuda_v4_engine_test} /tmp/before/deepinfer-{before,lanes};
#   run(carry=[".device-bin.tar.xz"], timeout_s=480, command="tar xJf .device-bin.tar.xz && tools/device/plan_forty_first.sh")
set -uo pipefail
source "$(dirname "$0")/loops.sh"
plan_start
run_test_specs "40:cuda_experts_test:*Fp8*:*Wide*" 60:cuda_v4_model_test 45:cuda_v4_synthetic_test 60:cuda_v4_engine_test
echo "tests rc=${TEST_RC:-?} ($((SECONDS - START)) s)"
p8="--synthetic v4-flash:4 --batch 1 --prompt-len 8192 --gen-len 2"
export BENCH_CONFIGS="$(decode_ab_configs "b1 b8 ep256 b1b b2 b8b b1c")
$(ab_sets "before lanes" "p8k $p8
p8kb $p8")"
run_benches "$BIN/deepinfer" 180 | grep -E "rc=[1-9]" | cut -c1-150
bench_device_ms
echo "benches done ($((SECONDS - START)) s)"
NCU=$(command -v ncu || ls /usr/local/cuda*/bin/ncu /opt/nvidia/nsight-compute/*/ncu 2>/dev/null | head -1)
for b in deepinfer deepinfer-lanes; do
  [ -n "$NCU" ] && [ $((SECONDS - START)) -lt 380 ] || break
  timeout 50 "$NCU" -k "regex:mxfp4_fp8_kernel" -c 2 --section SpeedOfLight --section MemoryWorkloadAnalysis \
    --section WarpStateStats --section ComputeWorkloadAnalysis \
    "$BIN/$b" bench --device cuda --synthetic v4-flash:2 --batch 1 --prompt-len 8192 --gen-len 0 \
    > "$OUT/ncu-experts-p8k-$b.txt" 2>&1
  echo "ncu $b rc=$?"
  grep -E "mxfp4_fp8_kernel|Duration|Throughput|Pipe|Issue Slots|Stall|Hit Rate|Warp Cycles|Eligible" \
    "$OUT/ncu-experts-p8k-$b.txt" | sed 's/  */ /g' | cut -c1-110 | head -44
done
plan_finish
echo "done ($((SECONDS - START)) s)"
