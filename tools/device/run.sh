#!/usr/bin/env bash
# One device call: build the CUDA targets, run the parity tests, run the ops bench, copy results
# to $OUT. Run from the repository root on the GPU machine, with .device-deps carried
# (tools/device/prepare.sh makes it here).
# MODE (first argument): "all" (default: the first slice's parity tests + ops bench, then the
# attention / cuBLASLt ones), "new" (the quantisation parity test of the first slice, then the
# cuBLASLt + attention parity tests and bench only).
MODE=${1:-all}
set -uo pipefail
OUT=${OUT:-/tmp/out}
mkdir -p "$OUT"
log() { echo "== $*"; }
{
  log "device"; nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.mem,temperature.gpu --format=csv
  nvcc --version | tail -1; cmake --version | head -1; g++ --version | head -1
} 2>&1 | tee "$OUT/env.txt"
J=$(nproc)
log "googletest"
cmake -S .device-deps/googletest -B /tmp/gtb -G Ninja -DCMAKE_BUILD_TYPE=Release -DBUILD_GMOCK=OFF \
  -DCMAKE_INSTALL_PREFIX=/tmp/gt > /tmp/gt.log 2>&1 && ninja -C /tmp/gtb install >> /tmp/gt.log 2>&1 \
  || { tail -30 /tmp/gt.log; exit 1; }
log "configure + build (CUDA targets only)"
cmake -S tools/device -B /tmp/bd -G Ninja -DCMAKE_CUDA_ARCHITECTURES=90a -DCMAKE_PREFIX_PATH=/tmp/gt \
  > "$OUT/build.log" 2>&1 && ninja -C /tmp/bd -j"$J" cuda_ops_test cuda_ops_bench cuda_attn_lt_test cuda_attn_lt_bench >> "$OUT/build.log" 2>&1 \
  || { tail -40 "$OUT/build.log"; exit 1; }
grep -E "warning|error" "$OUT/build.log" | head -5
log "SASS check (tensor-core instructions in the kernels)"
cuobjdump --dump-sass /tmp/bd/backend/libdi_backend_cuda.a 2>/dev/null | grep -oE "HMMA[.A-Z0-9]*|QGMMA|HGMMA|IMMA[.A-Z0-9]*" | sort | uniq -c | head
log "parity tests"
FILTER='*'
[ "$MODE" = new ] && FILTER='CudaOps.Quantize*'
timeout 240 /tmp/bd/tests_cuda/cuda_ops_test --gtest_filter="$FILTER" 2>&1 | tee "$OUT/parity.txt" | grep -vE "^\[ +(RUN|OK) " | tail -40
TEST_RC=${PIPESTATUS[0]}
timeout 240 /tmp/bd/tests_cuda/cuda_attn_lt_test 2>&1 | tee "$OUT/parity2.txt" | grep -vE "^\[ +(RUN|OK) " | tail -70
TEST2_RC=${PIPESTATUS[0]}
if [ "$MODE" != new ]; then
  log "bench"
  timeout 240 /tmp/bd/tests_cuda/cuda_ops_bench "$OUT/cuda-ops-h200.json" "${GIT_REV:-unknown}" 2>&1 | tee "$OUT/bench.txt"
fi
log "bench (cuBLASLt FP8, decode attention, decode sequence)"
timeout 300 /tmp/bd/tests_cuda/cuda_attn_lt_bench "$OUT/cuda-attention-h200.json" "${GIT_REV:-unknown}" 2>&1 | tee "$OUT/bench2.txt"
nvidia-smi --query-gpu=clocks.sm,clocks.mem,temperature.gpu --format=csv,noheader | tee -a "$OUT/env.txt"
echo "parity rc=$TEST_RC attn/lt parity rc=$TEST2_RC"
