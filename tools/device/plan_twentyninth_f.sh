#!/usr/bin/env bash
# RAN on an H100 2026-12-06 10:03 UTC, DROPPED (tests and sanitizers passed; no gain in the model: b1 device 1.165 -> 1.166 ms). The twenty-ninth slice, sixth call: the FP8 expert kernels' small launches. Groups of up to 16
# rows on a three-blocks-per-SM kernel (ring of 6 stages of 16 rows, 79 registers), and launches
# whose blocks fill under half of the GPU's slots split K in two (a second kernel adds the halves,
# first half first, and stores the rows). Why: at batch 1 the 6 experts' w13 launch was 192 blocks
# at 0.73 waves, 40% of DRAM (plan_twentyninth_e.sh). Tests (incl. Fp8ExpertsMatchCpuReferenceRounding
# with split launches), then the A / B against d7bf332's build (deepinfer-before).
# Build (here): /tmp/deepinfer-before = d7bf332's; ninja -C build deepinfer cuda_layer_ops_test
#   cuda_v4_model_test cuda_v4_synthetic_test cuda_v4_engine_test;
#   tools/device/pack_bins.sh build/tools/deepinfer/deepinfer /tmp/deepinfer-before
#   build/tests/cuda/{cuda_layer_ops_test,cuda_v4_model_test,cuda_v4_synthetic_test,cuda_v4_engine_test}
#   run(carry=[".device-bin.tar.xz"], timeout_s=360, command="tar xJf .device-bin.tar.xz &&
#       GIT_REV=<rev> tools/device/plan_twentyninth_f.sh")
set -uo pipefail
source "$(dirname "$0")/loops.sh"
plan_start

echo "== tests"
run_test_specs 90:cuda_layer_ops_test:CudaLayerOps.Fp8*:CudaLayerOps.Moe*:CudaLayerOps.Wide* 60:cuda_v4_model_test 40:cuda_v4_synthetic_test 60:cuda_v4_engine_test
grep -E "^fp8 experts" "$OUT/test-cuda_layer_ops_test.txt" | cut -c1-160 | tail -12
run_sanitized "$BIN" 80 "memcheck:cuda_layer_ops_test:CudaLayerOps.Fp8ExpertsMatchCpuReferenceRounding" \
  "racecheck:cuda_layer_ops_test:CudaLayerOps.Fp8ExpertsMatchCpuReferenceRounding"
F4="--synthetic v4-flash:4 --gen-len 8 --fill-state --prompt-len 4096"
export BENCH_CONFIGS="${BENCH_CONFIGS:-$(ab_pairs "b1 $F4 --batch 1
b2 $F4 --batch 2
b4 $F4 --batch 4
b8 $F4 --batch 8
b32 $F4 --batch 32")}"
run_benches "$BIN/deepinfer" "${BENCH_S:-100}" | grep -E "rc=|^decode |^decode step parts" | cut -c1-150
tar czf "$FINAL/runs.tgz" -C "$OUT" .
echo "tests rc=${TEST_RC:-?} ($((SECONDS - START)) s)"
