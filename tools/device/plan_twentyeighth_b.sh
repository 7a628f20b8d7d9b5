#!/usr/bin/env bash
# The second call of the twenty-eighth slice: the comb-side patch gated to kCombSideMaxT (64)
# tokens. plan_twentyeighth.sh measured it ungated on an H100: batch 1 device 1.257 -> 1.239 ms,
# batch 8 1.988 -> 1.944, batch 32 3.627 -> 3.604, but the EP step (256 tokens) 31.01 -> 31.50 ms.
# Here: the gated build against fd18c66, with batch 64 added (the largest batch that splits).
#   run(carry=[".device-bin.tar.xz", ".device-bin-before.tar.xz"], timeout_s=420, command="tar xJf ... &&
#       GIT_REV=<rev> tools/device/plan_twentyeighth_b.sh")
set -uo pipefail
source "$(dirname "$0")/loops.sh"
plan_start

echo "== tests"
run_test_specs 60:cuda_layer_ops_test:CudaLayerOps.Hc* 90:cuda_v4_model_test 60:cuda_v4_synthetic_test \
  120:cuda_v4_engine_test

echo "== deepinfer bench, before / after"
F4="--synthetic v4-flash:4"
export BENCH_CONFIGS="${BENCH_CONFIGS:-$(ab_pairs "b1 $F4 --batch 1 --prompt-len 4096 --gen-len 16 --fill-state
b8 $F4 --batch 8 --prompt-len 4096 --gen-len 16 --fill-state
b32 $F4 --batch 32 --prompt-len 4096 --gen-len 8 --fill-state
b64 $F4 --batch 64 --prompt-len 4096 --gen-len 8 --fill-state
ep256c4k --synthetic v4-flash-ep8 --batch 256 --gen-len 4 --fill-state --prompt-len 4096")}"
run_benches "$BIN/deepinfer" "${BENCH_S:-200}"
plan_finish
echo "tests rc=${TEST_RC:-?} ($((SECONDS - START)) s)"
