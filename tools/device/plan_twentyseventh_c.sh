#!/usr/bin/env bash
# The landed twenty-seventh slice (git f36ce26: the MoE's combine fused with the mHC post) tested
# and measured against the build before it (82e3798, deepinfer-before), without the serial-splits
# attention variant that shared the previous call. (Its first version also asked Nsight Systems for
# a batch-1 step's timeline: nsys is not on the GPU machine.)
# Build (here): ninja -C build deepinfer cuda_layer_ops_test cuda_v4_model_test cuda_v4_synthetic_test
#   cuda_v4_engine_test; tools/device/pack_bins.sh build/tools/deepinfer/deepinfer
#   build/tests/cuda/{cuda_layer_ops_test,cuda_v4_model_test,cuda_v4_synthetic_test,cuda_v4_engine_test}
#   run(carry=[".device-bin.tar.xz", ".device-bin-before.tar.xz"], timeout_s=420, command=
#     "tar xJf .device-bin-before.tar.xz && mv .device-bin/bin/deepinfer /tmp/deepinfer-before &&
#      tar xJf .device-bin.tar.xz && mv /tmp/deepinfer-before .device-bin/bin/ &&
#      GIT_REV=<rev> tools/device/plan_twentyseventh_c.sh")
set -uo pipefail
source "$(dirname "$0")/loops.sh"
plan_start

echo "== tests"
GTEST_FILTER='CudaLayerOps.Hc*:CudaLayerOps.Moe*' run_tests "$BIN" 60 cuda_layer_ops_test
krc=$TEST_RC
run_tests "$BIN" "${TESTS_S:-140}" cuda_v4_model_test cuda_v4_synthetic_test cuda_v4_engine_test
[ "$krc" = 0 ] || TEST_RC=1

echo "== deepinfer bench, before / after"
F4="--synthetic v4-flash:4"
export BENCH_CONFIGS="${BENCH_CONFIGS:-$(ab_pairs "ep256c4k --synthetic v4-flash-ep8 --batch 256 --gen-len 4 --fill-state --prompt-len 4096
p8k $F4 --batch 1 --prompt-len 8192 --gen-len 2
b1 $F4 --batch 1 --prompt-len 4096 --gen-len 16 --fill-state
b32 $F4 --batch 32 --prompt-len 4096 --gen-len 8 --fill-state")}"
run_benches "$BIN/deepinfer" "${BENCH_S:-200}"

plan_finish
echo "tests rc=${TEST_RC:-?} ($((SECONDS - START)) s)"
