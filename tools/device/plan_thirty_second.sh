#!/usr/bin/env bash
# RAN 2026-12-06 16:11 UTC on an H100 with two more changes in its build (below); the wo_a halves
# landed (after plan_thirty_second_b.sh placed them: faster at 8 of the 9 row counts measured,
# 129-256), the warp top-k was dropped (route bench 0.5-1.1 us slower at 1-256 tokens), the 8-warp
# ranks landed gated to > 256 slots. Figures: docs/performance.md, the thirty-second slice.
# Written 2026-12-06 on 743702d as tools/device/pending/thirty-second-wo-a-halves.patch (removed;
# compiled, no spills: NW = 128 206 registers, the narrower widths unchanged). The grouped wo_a
# (8 groups x 1024 x 4096) at 129-256 rows: both 128-row halves in one launch of the NW = 128 kernel
# (grid z = 2, side by side, the split of K planned for all the tiles) instead of the NW = 256
# kernel (one block takes both halves in turn, K split 2 over a cluster): at 256 rows that kernel
# spent ~30% of its stall samples in the split-K reduction (thirty-first slice, wgmma256g), and its
# halves run in series within a block. The weights are then read by two blocks each (side by side:
# the second read should come from L2). Question: is the grouped wo_a faster at 129-256 rows (op
# bench), and the EP step / v4-flash-4 batch 256 (model A / B)?
# Build (here, from a clean tree): ninja -C build deepinfer cuda_ops_bench; cp them to
#   /tmp/deepinfer-before, /tmp/cuda_ops_bench-before; git apply
#   tools/device/pending/thirty-second-wo-a-halves.patch; ninja -C build deepinfer cuda_ops_bench
#   cuda_ops_test cuda_v4_model_test cuda_v4_synthetic_test; tools/device/pack_bins.sh (those, the
#   before ones)
#   run(carry=[".device-bin.tar.xz"], timeout_s=400, command="tar xJf .device-bin.tar.xz &&
#       GIT_REV=<rev> tools/device/plan_thirty_second.sh")
# If the op bench and the EP step gain: commit the patched tree, remove the patch.
# Ran first in the session of 2026-12-06 15:32 with a second change in the same build: the router's
# top-k by one warp per token (moe_route.cu, E <= 256; the same bits), checked by the route tests
# and A / B'd alone by cuda_ops_bench's route:T:E (logits + top-k in a graph), the model rows then
# measuring both; build: cuda_layer_ops_test added to the pack. And a third: moe_groups_kernel's
# slot ranks by all 8 warps (an eighth of the slots each, E <= 256; warp 0 walked all 1,536 of the
# EP step's), checked by CudaModelOps.MoeSort* against the host's stable sort (the EP shapes added)
# and timed by the route bench's new moe_build_groups row (in both builds' bench).
set -uo pipefail
source "$(dirname "$0")/loops.sh"
plan_start
run_test_specs 40:cuda_ops_test:CudaOps.Fp8* 40:cuda_layer_ops_test:CudaLayerOps.Route* 60:cuda_experts_test \
  30:cuda_model_ops_test:CudaModelOps.MoeSort* 50:cuda_v4_model_test 50:cuda_v4_synthetic_test
run_sanitized "$BIN" 100 "memcheck:cuda_ops_test:CudaOps.Fp8WgmmaLinearMatchesCpu" \
  "memcheck:cuda_layer_ops_test:CudaLayerOps.RouteRowInvariance" \
  "racecheck:cuda_model_ops_test:CudaModelOps.MoeSortTokensMatchesStableSortAndBuildGroups"
echo "tests rc=${TEST_RC:-?} san rc=${SAN_RC:-?} ($((SECONDS - START)) s)"
for m in 129 200 256; do ops_ab "fp8paths:1024:4096:8:$m" "fp8/wgmma" 1; done
for r in route:1:256 route:8:256 route:256:32 route:256:256; do ops_ab "$r" "moe_route|moe_build" 2; done  # logits + top-k; groups
f4="--synthetic v4-flash:4" dec="--gen-len 8 --fill-state --prompt-len 4096"
export BENCH_CONFIGS="${BENCH_CONFIGS:-$(ab_pairs "ep256c4k --synthetic v4-flash-ep8 --batch 256 --gen-len 4 --fill-state --prompt-len 4096
b256 $f4 $dec --batch 256
b1 $f4 $dec --batch 1
b8 $f4 $dec --batch 8")}"
run_benches "$BIN/deepinfer" "${BENCH_S:-200}" | grep -E "rc=|^decode |^decode step parts" | cut -c1-150
plan_finish
echo "done ($((SECONDS - START)) s)"
