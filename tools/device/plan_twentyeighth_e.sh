#!/usr/bin/env bash
# The twenty-eighth slice's last call: the default mode's decode split by batch
# (dc::decode_split_rows; plan_twentyeighth_d.sh measured the attention alone by split size: at
# 256 queries one split 121 us against 164 for three, at 128 65 against 90, at 64 two splits 43
# against 54, at 32 and below three splits of 256 fastest), A/B against 6479925 in the model; if
# the tests pass, the issue's matrix at this build follows in the same call (plan_matrix.sh,
# PEER_S=0: the peer column from bench/results/peer-transformers-h100.json).
# Build (here): /tmp/deepinfer-before = 6479925's deepinfer; ninja -C build deepinfer
#   cuda_attn_lt_test cuda_v4_model_test cuda_v4_synthetic_test cuda_v4_engine_test;
#   tools/device/pack_bins.sh build/tools/deepinfer/deepinfer /tmp/deepinfer-before
#   build/tests/cuda/{cuda_attn_lt_test,cuda_v4_model_test,cuda_v4_synthetic_test,cuda_v4_engine_test}
#   run(carry=[".device-bin.tar.xz"], timeout_s=590, command="tar xJf .device-bin.tar.xz &&
#       GIT_REV=<rev> tools/device/plan_twentyeighth_e.sh && PEER_S=0 BENCH_S=290 GIT_REV=<rev> tools/device/plan_matrix.sh")
set -uo pipefail
source "$(dirname "$0")/loops.sh"
plan_start

echo "== tests"
run_test_specs 60:cuda_attn_lt_test:CudaAttention.* 90:cuda_v4_model_test 60:cuda_v4_synthetic_test 120:cuda_v4_engine_test

echo "== deepinfer bench, before / after"
F4="--synthetic v4-flash:4"
export BENCH_CONFIGS="${BENCH_CONFIGS:-$(ab_pairs "ep256c4k --synthetic v4-flash-ep8 --batch 256 --gen-len 4 --fill-state --prompt-len 4096
b64 $F4 --batch 64 --prompt-len 4096 --gen-len 8 --fill-state
b128 $F4 --batch 128 --prompt-len 4096 --gen-len 8 --fill-state
b256 $F4 --batch 256 --prompt-len 4096 --gen-len 8 --fill-state
b32 $F4 --batch 32 --prompt-len 4096 --gen-len 8 --fill-state")}"
run_benches "$BIN/deepinfer" "${BENCH_S:-150}"
plan_finish
echo "tests rc=${TEST_RC:-?} ($((SECONDS - START)) s)"
[ "${TEST_RC:-1}" = 0 ]
