#!/usr/bin/env bash
# One device call for the decode-layer slice: build the layer-op and expert parity tests and the layer
# bench (CUDA targets only), run both, copy results to $OUT. Run from the repository root on the
# GPU machine with .device-deps carried (tools/device/prepare.sh: GoogleTest + nlohmann/json).
set -uo pipefail
OUT=${OUT:-/tmp/out}
mkdir -p "$OUT"
log() { echo "== $*"; }
{
  log "device"; nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.mem,temperature.gpu --format=csv
  nvcc --version | tail -1
} 2>&1 | tee "$OUT/env.txt"
J=$(nproc)
log "googletest"
cmake -S .device-deps/googletest -B /tmp/gtb -G Ninja -DCMAKE_BUILD_TYPE=Release -DBUILD_GMOCK=OFF \
  -DCMAKE_INSTALL_PREFIX=/tmp/gt > /tmp/gt.log 2>&1 && ninja -C /tmp/gtb install >> /tmp/gt.log 2>&1 \
  || { tail -30 /tmp/gt.log; exit 1; }
log "configure + build"
cmake -S tools/device -B /tmp/bd -G Ninja -DCMAKE_CUDA_ARCHITECTURES=90a -DCMAKE_PREFIX_PATH=/tmp/gt \
  > "$OUT/build.log" 2>&1 && ninja -C /tmp/bd -j"$J" cuda_layer_ops_test cuda_experts_test cuda_layer_bench >> "$OUT/build.log" 2>&1 \
  || { tail -40 "$OUT/build.log"; exit 1; }
log "parity (layer ops vs CPU)"
timeout 180 /tmp/bd/tests_cuda/cuda_layer_ops_test 2>&1 | tee "$OUT/parity-layer.txt" | grep -vE "^\[ +(RUN|OK) " | tail -40
TEST_RC=${PIPESTATUS[0]}
timeout 180 /tmp/bd/tests_cuda/cuda_experts_test 2>&1 | tee "$OUT/parity-experts.txt" | grep -vE "^\[ +(RUN|OK) " | tail -40
[ "${PIPESTATUS[0]}" = 0 ] || TEST_RC=1
log "layer bench"
timeout 300 /tmp/bd/tests_cuda/cuda_layer_bench "$OUT/cuda-layer-h200.json" "${GIT_REV:-unknown}" 2>&1 | tee "$OUT/bench-layer.txt"
BENCH_RC=${PIPESTATUS[0]}
nvidia-smi --query-gpu=clocks.sm,clocks.mem,temperature.gpu --format=csv,noheader | tee -a "$OUT/env.txt"
echo "parity rc=$TEST_RC bench rc=$BENCH_RC"
