#!/usr/bin/env bash
# The thirty-second slice's second call (2026-12-06; plan_thirty_second.sh's build measured first):
# the router's warp top-k dropped (slower in the route bench), moe_groups_kernel's 8-warp ranks
# gated to more than 256 slots (below, the split's barriers cost 0.6 us), the wo_a halves at every
# 129-256 rows as before. Tests over both ranking paths (MoeSort cases of 222, 252, 258 and 1,536+
# slots), the route bench at the gate's sides, and the grouped wo_a at 144-248 rows to place its
# gate (129 / 200 / 256 measured in the first call: 1.8% faster / 2.5% slower / 8.5% faster).
# Build: as plan_thirty_second.sh (before = the session's HEAD with the bench hunk only).
# RAN 2026-12-06 16:23 UTC on an H100 (70 s): tests and racecheck passed; wo_a faster at 144-248
# rows; the ranks 13.45 -> 6.50 us at the EP shape, unchanged at 258 slots; EP device 27.56 ->
# 27.22 ms. Landed as this build.
set -uo pipefail
source "$(dirname "$0")/loops.sh"
plan_start
run_test_specs 40:cuda_layer_ops_test:CudaLayerOps.Route* 60:cuda_experts_test 30:cuda_model_ops_test:CudaModelOps.MoeSort* \
  50:cuda_v4_model_test 50:cuda_v4_synthetic_test
run_sanitized "$BIN" 60 "racecheck:cuda_model_ops_test:CudaModelOps.MoeSortTokensMatchesStableSortAndBuildGroups"
echo "tests rc=${TEST_RC:-?} san rc=${SAN_RC:-?} ($((SECONDS - START)) s)"
for r in route:8:256 route:43:32 route:256:32; do ops_ab "$r" "moe_build" 1; done
for m in 144 160 176 192 208 224 240 248; do ops_ab "fp8paths:1024:4096:8:$m" "fp8/wgmma" 1; done
export BENCH_CONFIGS="${BENCH_CONFIGS:-$(ab_pairs "ep256c4k --synthetic v4-flash-ep8 --batch 256 --gen-len 4 --fill-state --prompt-len 4096")}"
run_benches "$BIN/deepinfer" "${BENCH_S:-90}" | grep -E "rc=|^decode |^decode step parts" | cut -c1-150
plan_finish
echo "done ($((SECONDS - START)) s)"
