#!/usr/bin/env bash
# The thirty-third slice's second call: plan_thirty_third.sh's build with wq_b's bf16 output chosen
# inside Forward::linear (so the unpacked path, act_pack off, takes it too: TuningChangesNoBits
# failed in the first call, where only the packed path wrote bf16). Tests, then the EP step A / B
# (deepinfer-before: 7d32178 with the route bench row) twice.
set -uo pipefail
source "$(dirname "$0")/loops.sh"
plan_start
run_test_specs 60:cuda_experts_test "30:cuda_model_ops_test:CudaModelOps.HeadNormRope*" 60:cuda_v4_model_test \
  60:cuda_v4_synthetic_test 60:cuda_v4_engine_test
echo "tests rc=${TEST_RC:-?} ($((SECONDS - START)) s)"
ep="--synthetic v4-flash-ep8 --batch 256 --gen-len 4 --fill-state --prompt-len 4096"
export BENCH_CONFIGS="${BENCH_CONFIGS:-before-ep256c4k $ep
ep256c4k $ep
ep256c4k2 $ep
before-ep256c4k2 $ep}"
run_benches "$BIN/deepinfer" "${BENCH_S:-120}" | grep -E "rc=|^decode |^decode step parts" | cut -c1-150
plan_finish
echo "done ($((SECONDS - START)) s)"
