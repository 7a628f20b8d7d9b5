#!/usr/bin/env bash
# The thirty-ninth slice's plan (written 2026-12-07 ~10:10 UTC after the session's device time ran
# out; not run): tools/device/pending/thirty-ninth-split-k-experts.patch (the FP8 expert kernels at
# decode widths with K split over clusters of 2 blocks where twice the blocks fit the GPU at once:
# batch 1's w13 / w2, 192 blocks of 32 / 16 serial chunks each at ~1.7 TB/s) and
# tools/device/pending/thirty-ninth-launch-helpers.patch (launch_pdl through launch_pdl_cluster:
# one launch configuration; host code, the same launches).
# - tests: the FP8 experts against the CPU (split by the rule at 5 x 1 rows, forced at 16-row
#   groups, unsplit), the mHC tests (cluster launches), the wgmma linear, the model / synthetic /
#   engine tests; racecheck and memcheck over the experts test;
# - A/B against the build without the patches (deepinfer-before) at batch 1 (twice), 2 and 8;
# - batch 1 with --attn-split 64 (twice; the thirty-eighth slice's one sample: 1.077 -> 1.067 ms);
# - batch 1's step kernel by kernel (ncu).
# Build (here): git apply tools/device/pending/thirty-ninth-*.patch; ninja -C build;
#   tools/device/pack_bins.sh build/tools/deepinfer/deepinfer build/tests/cuda/{cuda_experts_test,
#   cuda_layer_ops_test,cuda_ops_test,cuda_v4_model_test,cuda_v4_synthetic_test,cuda_v4_engine_test}
#   DIR/deepinfer-before; run(carry=[".device-bin.tar.xz"], timeout_s=420,
#   command="tar xJf .device-bin.tar.xz && tools/device/plan_thirty_ninth.sh")
set -uo pipefail
source "$(dirname "$0")/loops.sh"
plan_start
run_test_specs "90:cuda_experts_test:CudaExperts.Fp8*" "60:cuda_layer_ops_test:CudaLayerOps.Hc*" \
  "40:cuda_ops_test:CudaOps.Fp8Wgmma*" 80:cuda_v4_model_test 90:cuda_v4_synthetic_test 80:cuda_v4_engine_test
echo "tests rc=${TEST_RC:-?} ($((SECONDS - START)) s)"
run_sanitized "$BIN" 120 "racecheck:cuda_experts_test:CudaExperts.Fp8ExpertsMatchCpuReferenceRounding" \
  "memcheck:cuda_experts_test:CudaExperts.Fp8ExpertsMatchCpuReferenceRounding"
echo "sanitizers rc=${SAN_RC:-?} ($((SECONDS - START)) s)"
f4="--synthetic v4-flash:4 --gen-len 8 --fill-state --prompt-len 4096"
export BENCH_CONFIGS="$(ab_pairs "b1 $f4 --batch 1
b2 $f4 --batch 2
b8 $f4 --batch 8
b1b $f4 --batch 1")
s64-b1 $f4 --batch 1 --attn-split 64
s64-b1b $f4 --batch 1 --attn-split 64"
run_benches "$BIN/deepinfer" 100 | grep -E "rc=|^decode " | cut -c1-150
bench_device_ms
ncu_step_table $((400 - (SECONDS - START))) "--synthetic v4-flash:4 --batch 1 --prompt-len 4096 --fill-state --gen-len 8" 40
plan_finish
echo "done ($((SECONDS - START)) s)"
