#!/usr/bin/env bash
# One device call for the DeepSeek-V4 GPU model (issue 5, point 2): build the device project's
# targets it needs (tools/device/CMakeLists.txt), run cuda_v4_model_test (GPU model vs the CPU
# V4Model on a synthetic V4-Flash-shaped checkpoint) and cuda_model_bench_test. Run from the
# repository root on the GPU machine with .device-deps carried (tools/device/prepare.sh). Every
# part is time-boxed (sum of the boxes: 400 s); logs in $OUT.
set -uo pipefail
source tools/device/common.sh
log "build"
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
