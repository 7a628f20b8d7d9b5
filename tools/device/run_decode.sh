#!/usr/bin/env bash
# One device call for the GPU model's batched decode and decode graphs (issue 5): build the device
# project's CUDA tests (tools/device/CMakeLists.txt), run them, then the binaries built on the
# development machine and carried in .device-bin (tools/device/pack_bins.sh): cuda_v4_engine_test
# (src/engine on the GPU model) and `deepinfer bench --synthetic` (the library's GPU model on
# random real-shape V4-Flash weights made on the device), and bench/cuda_model's decode rows for
# the same shapes. Run from the repository root on the GPU machine with .device-deps and
# .device-bin carried. Every part is time-boxed (BUILD_S, PARITY_S, BENCH_S); logs in $OUT.
set -uo pipefail
source tools/device/common.sh
TESTS=${TESTS:-"cuda_compress_test cuda_attn_lt_test cuda_layer_ops_test cuda_experts_test cuda_v4_model_test cuda_v4_synthetic_test cuda_model_bench_test"}
log "build (box ${BUILD_S:-200} s)"
timeout "${BUILD_S:-200}" ninja -C /tmp/bd -j"$J" -k 0 $TESTS >> "$OUT/build.log" 2>&1
BUILD_RC=$?
grep -E "error|FAILED" "$OUT/build.log" | head -20
log "tests (box ${PARITY_S:-200} s in all)"
source tools/device/loops.sh
# shellcheck disable=SC2086
run_tests /tmp/bd/tests_cuda "${PARITY_S:-200}" $TESTS
log "carried binaries"
CUDA_LIB=$(dirname "$(dirname "$(command -v nvcc)")")
export LD_LIBRARY_PATH="$PWD/.device-bin/lib:$CUDA_LIB/lib64:$CUDA_LIB/lib:$CUDA_LIB/targets/x86_64-linux/lib:${LD_LIBRARY_PATH:-}"
DI=.device-bin/bin/deepinfer
ldd --version | head -1
if ! "$DI" devices > "$OUT/devices.txt" 2>&1; then
  export LD_LIBRARY_PATH="$PWD/.device-bin/lib-stdcxx:$LD_LIBRARY_PATH"
  "$DI" devices > "$OUT/devices.txt" 2>&1 || { echo "carried deepinfer does not run:"; cat "$OUT/devices.txt"; ldd "$DI" | grep -i "not found"; }
fi
cat "$OUT/devices.txt"
BIN_RC=0
if [ -x .device-bin/bin/cuda_v4_engine_test ]; then
  timeout 120 .device-bin/bin/cuda_v4_engine_test > "$OUT/test-cuda_v4_engine_test.txt" 2>&1 || BIN_RC=1
  grep -E "^\[  FAILED|^\[  PASSED|tokens|Failure" "$OUT/test-cuda_v4_engine_test.txt" | head -12
fi
log "deepinfer bench --synthetic (box ${BENCH_S:-200} s in all)"
run_benches "$DI" "${BENCH_S:-200}"
nvidia-smi --query-gpu=clocks.sm,clocks.mem,temperature.gpu --format=csv,noheader | tee -a "$OUT/env.txt"
echo "build rc=$BUILD_RC tests rc=$TEST_RC carried rc=$BIN_RC"
