#!/usr/bin/env bash
# One device call for the DeepSeek-V4 GPU model (issue 5, point 2): build the device project's
# targets it needs (tools/device/CMakeLists.txt), run cuda_v4_model_test (GPU model vs the CPU
# V4Model on a synthetic V4-Flash-shaped checkpoint) and cuda_model_bench_test. Run from the
# repository root on the GPU machine with .device-deps carried (tools/device/prepare.sh). Every
# part is time-boxed (sum of the boxes: 400 s); logs in $OUT.
set -uo pipefail
OUT=${OUT:-/tmp/out}
mkdir -p "$OUT"
log() { echo "== $* ($(date +%T))"; }
{
  log "device"; nvidia-smi --query-gpu=name,driver_version,memory.used,memory.total --format=csv
  nvcc --version | tail -1; nproc
} 2>&1 | tee "$OUT/env.txt"
J=$(nproc)
log "googletest (box 40 s)"
timeout 40 bash -c "cmake -S .device-deps/googletest -B /tmp/gtb -G Ninja -DCMAKE_BUILD_TYPE=Release -DBUILD_GMOCK=OFF \
  -DCMAKE_INSTALL_PREFIX=/tmp/gt > /tmp/gt.log 2>&1 && ninja -C /tmp/gtb install >> /tmp/gt.log 2>&1" \
  || { tail -30 /tmp/gt.log; exit 1; }
log "configure + build (box 20 + 150 s)"
timeout 20 cmake -S tools/device -B /tmp/bd -G Ninja -DCMAKE_CUDA_ARCHITECTURES=90a -DCMAKE_PREFIX_PATH=/tmp/gt \
  > "$OUT/build.log" 2>&1 || { tail -40 "$OUT/build.log"; exit 1; }
timeout 150 ninja -C /tmp/bd -j"$J" -k 0 cuda_v4_model_test cuda_model_bench_test >> "$OUT/build.log" 2>&1
BUILD_RC=$?
grep -E "error|FAILED" "$OUT/build.log" | head -20
log "cuda_model_bench_test (box 30 s)"
timeout 30 /tmp/bd/tests_cuda/cuda_model_bench_test > "$OUT/cuda_model_bench_test.txt" 2>&1
BENCH_RC=$?
tail -5 "$OUT/cuda_model_bench_test.txt"
log "cuda_v4_model_test (box 160 s)"
timeout 160 /tmp/bd/tests_cuda/cuda_v4_model_test > "$OUT/cuda_v4_model_test.txt" 2>&1
MODEL_RC=$?
grep -vE "^\[ RUN|^\[       OK" "$OUT/cuda_v4_model_test.txt" | tail -80
echo "build rc=$BUILD_RC cuda_model_bench_test rc=$BENCH_RC cuda_v4_model_test rc=$MODEL_RC"
[ $BUILD_RC -eq 0 ] && [ $BENCH_RC -eq 0 ] && [ $MODEL_RC -eq 0 ]
