#!/usr/bin/env bash
# Ran on an H100 on 2026-12-06 (third session; written the session before with its budget spent):
#   tools/device/pending/twentyseventh-comb-side.patch: the mHC pre's Sinkhorn off the path from the
#   residual to a sub-layer's input. Below 1,025 tokens hc_finish_kernel ran the Sinkhorn (20
#   iterations of shuffles and divisions, ~3 us of serial latency) in its column block 0 while the
#   other blocks had long finished, and the sub-layer's norm waited for the whole grid (hc_finish
#   6.2 us at batch 1 on the H200, 9.5 us at 256 rows on the H100; 9 and 87 launches a step). Now
#   hc_pre(comb_later) writes pre / post / input without comb, and hc_pre_comb (the same kernel,
#   comb only) runs on side lane 6 (Forward::hc_pre_split), joined before the closing hc_post /
#   combine (Forward::join_comb), which is also before the partials' workspace is written again.
#   Bitwise hc_pre's outputs (CudaLayerOps.HcCombLaterBitwise; the V4 tests' graph replay and
#   batch-invariant checks). Expected: ~2-3 us a sub-layer off the batch-1 / batch-8 step. Unlike
#   the twenty-third slice's dropped attempt (Sinkhorn blocks of 256 threads added to hc_finish's
#   own grid: past one wave at 256 tokens, EP step +1.1 ms), the comb kernel is a separate launch
#   of 64-thread blocks on a side stream; the EP row (256 tokens) is the one to watch.
# Build (here, clean tree): tools/device/build_pending_ab.sh "" tools/device/pending/twentyseventh-comb-side.patch
#   run(carry=[".device-bin.tar.xz"], timeout_s=420,
#       command="tar xJf .device-bin.tar.xz && GIT_REV=<rev>+comb-side tools/device/plan_twentyeighth.sh")
# If the tests pass and the A/B gains: commit the patched tree (the patch file removed).
set -uo pipefail
source "$(dirname "$0")/loops.sh"
plan_start

echo "== tests"
run_test_specs 60:cuda_layer_ops_test:CudaLayerOps.Hc*:CudaLayerOps.Moe* 90:cuda_v4_model_test 60:cuda_v4_synthetic_test \
  120:cuda_v4_engine_test
run_sanitized "$BIN" 60 "racecheck:cuda_layer_ops_test:CudaLayerOps.HcCombLaterBitwise" \
  "memcheck:cuda_layer_ops_test:CudaLayerOps.HcCombLaterBitwise"

echo "== deepinfer bench, before / after"
F4="--synthetic v4-flash:4"
export BENCH_CONFIGS="${BENCH_CONFIGS:-$(ab_pairs "b1 $F4 --batch 1 --prompt-len 4096 --gen-len 16 --fill-state
b8 $F4 --batch 8 --prompt-len 4096 --gen-len 16 --fill-state
b32 $F4 --batch 32 --prompt-len 4096 --gen-len 8 --fill-state
ep256c4k --synthetic v4-flash-ep8 --batch 256 --gen-len 4 --fill-state --prompt-len 4096")}"
run_benches "$BIN/deepinfer" "${BENCH_S:-200}"
plan_finish
echo "tests rc=${TEST_RC:-?} sanitizer rc=${SAN_RC:-?} ($((SECONDS - START)) s)"
