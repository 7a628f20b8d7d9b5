#!/usr/bin/env bash
# The twenty-first slice's last, short device call (written 2026-12-05 evening; the device budget
# left is under 300 s): (1) mHC pre's partial at 2 tokens a thread through an 8-deep ring (3
# before: about 16 KB an SM in flight at 256 tokens, 17.6 us); (2) past 256 rows (prefill chunks)
# the grouped wo_a's input quantised once into group-major e4m3 and wo_b's straight from the
# groups' outputs (quantize_act_fp8_t_grouped), with no transposed copies. Tests over both (the
# grouped quantisation bitwise against quantize_act_fp8_t; a 300-token prefill with and without
# act_pack bitwise equal; the mHC tests), then the 8k prefill and the EP batch-256 step with and
# without (before-*: git 1d480f9, the third call's build).
#   run(carry=[".device-bin.tar.xz"], timeout_s=200,
#       command="tar xJf .device-bin.tar.xz && GIT_REV=<rev> tools/device/plan_twentyfirst_d.sh")
set -uo pipefail
source "$(dirname "$0")/loops.sh"
plan_start

echo "== tests"
GTEST_FILTER='CudaOps.Quantize*:CudaLayerOps.Hc*' run_tests "$BIN" "${KTESTS_S:-25}" cuda_ops_test cuda_layer_ops_test
KRC=$TEST_RC
GTEST_FILTER='V4Synthetic.TuningChangesNoBits:V4Synthetic.RealShapesRun' run_tests "$BIN" "${TESTS_S:-60}" cuda_v4_synthetic_test
[ "$KRC" = 0 ] || TEST_RC=1

echo "== deepinfer bench (box ${BENCH_S:-110} s)"
EP="--synthetic v4-flash-ep8 --batch 256 --prompt-len 512 --gen-len 3"
P8="--synthetic v4-flash:4 --batch 1 --prompt-len 8192 --gen-len 2"
export BENCH_CONFIGS="${BENCH_CONFIGS:-p8k $P8
before-p8k $P8
ep256 $EP
before-ep256 $EP}"
run_benches "$BIN/deepinfer" "${BENCH_S:-110}"
plan_finish
echo "tests rc=${TEST_RC:-?}"
