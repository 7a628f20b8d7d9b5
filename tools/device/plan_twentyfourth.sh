#!/usr/bin/env bash
# The next session's first device call (written 2026-12-05 night, the device budget spent):
#   tools/device/pending/twentyfourth-router-staged.patch: the router's logits past 8 tokens from a
#   shared-memory ring (router_logits_staged_kernel, new src/backend/cuda/moe_route.cu with the
#   routing moved out of layer_ops.cu): each token row read once per block instead of once per
#   warp (the EP step's 256 x 32 router pulled ~128 MB through L2 for 4 MB of rows: 24 us a layer
#   on the H100). Same per-lane values and fmaf order: the router tests check every tile shape
#   bitwise against the direct kernel (RouteRowInvariance: 7 rows run the direct kernel, 64 / 128 /
#   300 / 4100 the staged tiles) and against the CPU.
#   tools/device/pending/twentyfourth-route-bench.patch: `cuda_ops_bench OUT x route:T:E` (apply it
#   for both builds so the A/B has the same bench).
#   tools/device/pending/twentyfourth-fill-state.patch: `deepinfer bench --fill-state` (decode only:
#   each state filled with random entries of --prompt-len tokens, Model::fill_synthetic_state), so
#   the issue's EP row at context 4096 (and 32k rows at large batches) cost no prefill. Checked here
#   by V4Synthetic.FilledStateDecodes and by the EP step at context 512 both ways (filled and
#   prefilled: the step times should agree within the run-to-run spread). It also grows the
#   compressed entries by 1.5x to at most the rows asked for rounded up to 64
#   (GpuCompressorState::grown_capacity, tested without a device in GpuCompressorState.GrownCapacity)
#   instead of doubling: a 32k context held 2x its entries.
#   tools/device/pending/twentyfifth-ordered-state.patch (written 2026-12-05 late, no device): every
#   buffer of a sequence's state in stream-ordered memory (cudaMallocAsync / cudaFreeAsync on the
#   legacy stream, DeviceBuffer::ordered_zeros), so making, growing, cloning and freeing a state
#   never waits for the device (it did: cudaFree and the zeros' pageable uploads wait for every
#   step in flight; each growth synchronised the device). Checked by
#   V4Synthetic.StateMemoryNeverWaitsForTheDevice (a host callback holds a stream while the state
#   calls run), memcheck over it, every model / engine test (chunked prefill grows entries), and the
#   engine under turnover before / after (`deepinfer bench --engine --churn 4`: 128 requests of
#   32-96 tokens through 32 slots).
#   tools/device/pending/twentyfifth-device-memory.patch: V4GpuModel::device_memory (cudaMemGetInfo),
#   the GPU side of `serve --gpu-memory-utilization`; CudaV4Engine.StateCapacityFromDeviceMemory.
#   tools/device/pending/twentyfourth-tidy.patch (written 2026-12-05 late, no device): the expert
#   kernels' ring advance written once (Copier::next) and fp8_linear_lt's cublasLtMatmul call once
#   (the timer and the final call share it); same instructions intended. Checked by the FP8 expert
#   tests (CPU rounding, wide = narrow) and CudaLt.Fp8BlockScaledMatchesCpu.
# Build (here): tools/device/build_pending_ab.sh tools/device/pending/twentyfourth-route-bench.patch \
#   "tools/device/pending/twentyfourth-router-staged.patch tools/device/pending/twentyfourth-fill-state.patch
#    tools/device/pending/twentyfourth-tidy.patch tools/device/pending/twentyfifth-ordered-state.patch
#    tools/device/pending/twentyfifth-device-memory.patch"
#   (the route bench in both builds; the router patch adds src/backend/cuda/moe_route.cu and lane_math.cuh)
#   run(carry=[".device-bin.tar.xz"], command="tar xJf .device-bin.tar.xz && GIT_REV=<rev> tools/device/plan_twentyfourth.sh")
set -uo pipefail
source "$(dirname "$0")/loops.sh"
plan_start

echo "== tests"
GTEST_FILTER='CudaLayerOps.Route*:CudaLayerOps.MoeSublayer*:CudaLayerOps.*Experts*' run_tests "$BIN" 60 cuda_layer_ops_test
KRC=$TEST_RC
GTEST_FILTER='CudaLt.*' run_tests "$BIN" 30 cuda_attn_lt_test
[ "$TEST_RC" = 0 ] || KRC=1
run_tests "$BIN" "${TESTS_S:-140}" cuda_v4_model_test cuda_v4_synthetic_test cuda_v4_engine_test
[ "$KRC" = 0 ] || TEST_RC=1
# (memcheck last: a whole small model under it may use the rest of the box; a cut run says "rc=124")
run_sanitized "$BIN" 120 "memcheck:cuda_layer_ops_test:CudaLayerOps.Route*" "racecheck:cuda_layer_ops_test:CudaLayerOps.Route*" \
  "memcheck:cuda_v4_synthetic_test:V4Synthetic.StateMemoryNeverWaitsForTheDevice"

echo "== op bench: the router"
for sh in route:256:32 route:256:256 route:64:256 route:16:32; do ops_ab "$sh" moe_route 1; done
ncu_ab router_logits gpu__time_duration.sum,lts__t_bytes.sum,smsp__issue_active.avg.pct_of_peak_sustained_active route:256:32

BOX=${BENCH_S:-$((565 - (SECONDS - START)))}
[ "$BOX" -ge 60 ] || BOX=60
echo "== deepinfer bench (box $BOX s)"
EP="--synthetic v4-flash-ep8 --batch 256 --gen-len 4"
CHURN="--synthetic v4-flash:4 --batch 32 --prompt-len 256 --gen-len 64 --engine --churn 4"
export BENCH_CONFIGS="${BENCH_CONFIGS:-ep256 $EP --prompt-len 512
before-ep256 $EP --prompt-len 512
ep256c4kfill $EP --prompt-len 4096 --fill-state
churn32 $CHURN
before-churn32 $CHURN
ep256fill $EP --prompt-len 512 --fill-state}"
run_benches "$BIN/deepinfer" "$BOX"
plan_finish
echo "tests rc=${TEST_RC:-?} sanitizer rc=${SAN_RC:-?} ($((SECONDS - START)) s)"
