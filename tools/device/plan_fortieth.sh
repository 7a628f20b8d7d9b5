#!/usr/bin/env bash
# The fortieth slice's plan (written 2026-12-07 ~12:10 UTC on 73f6a26 after the session's device time
# ran out; not run): tools/device/pending/fortieth-swiglu-rows-in-w13.patch, the w2 step's e4m3 rows
# written by w13's launch (swiglu_rows_e4m3: blocks in clusters of 2 along the columns share each
# row's 128-column scale by DSMEM; no a32, no moe_rows_fp8 launch between w13 and w2, groups of
# <= 64 rows: decode and EP steps).
# - tests: the FP8 experts (the fused rows bitwise moe_rows_fp8's bytes and scales at every width
#   <= 64, split and unsplit; bad input at 128), model / synthetic / engine; racecheck and memcheck
#   over the experts test (the cluster barriers and the DSMEM reads);
# - A/B against 73f6a26 (deepinfer-before) at batch 1 (twice), 2, 4, 8 (twice), 16, 32 and the EP step.
# If a test hangs, suspect the split kernel's z = 1 blocks and the epilogue's two cluster barriers.
# Build (here, from a clean 73f6a26): ninja -C build tools/deepinfer/deepinfer; cp build/tools/deepinfer/deepinfer
#   /tmp/before/deepinfer-before; git apply tools/device/pending/fortieth-swiglu-rows-in-w13.patch; ninja -C build;
#   tools/device/pack_bins.sh build/tools/deepinfer/deepinfer build/tests/cuda/{cuda_experts_test,cuda_v4_model_test,
#   cuda_v4_synthetic_test,cuda_v4_engine_test} /tmp/before/deepinfer-before; run(carry=[".device-bin.tar.xz"],
#   timeout_s=420, command="tar xJf .device-bin.tar.xz && tools/device/plan_fortieth.sh")
set -uo pipefail
source "$(dirname "$0")/loops.sh"
plan_start
run_test_specs 150:cuda_experts_test 80:cuda_v4_model_test 90:cuda_v4_synthetic_test 80:cuda_v4_engine_test
echo "tests rc=${TEST_RC:-?} ($((SECONDS - START)) s)"
run_sanitized "$BIN" 120 "racecheck:cuda_experts_test:CudaExperts.Fp8ExpertsMatchCpuReferenceRounding" \
  "memcheck:cuda_experts_test:CudaExperts.Fp8ExpertsMatchCpuReferenceRounding"
echo "sanitizers rc=${SAN_RC:-?} ($((SECONDS - START)) s)"
f4="--synthetic v4-flash:4 --gen-len 8 --fill-state --prompt-len 4096"
export BENCH_CONFIGS="$(ab_pairs "b1 $f4 --batch 1
b2 $f4 --batch 2
b4 $f4 --batch 4
b8 $f4 --batch 8
b16 $f4 --batch 16
b32 $f4 --batch 32
ep256 --synthetic v4-flash-ep8 --batch 256 --gen-len 4 --fill-state --prompt-len 4096
b1b $f4 --batch 1
b8b $f4 --batch 8")"
run_benches "$BIN/deepinfer" 200 | grep -E "rc=[1-9]" | cut -c1-150
for f in "$OUT"/bench-*.txt; do printf '%s: %s\n' "$(basename "$f" .txt)" "$(grep -oE 'device [0-9.]+ ms' "$f" | head -1)"; done
plan_finish
echo "done ($((SECONDS - START)) s)"
