#!/usr/bin/env bash
# The twenty-first slice's fourth (last, short) device call (written 2026-12-05 evening): mHC pre's
# partial at 2 tokens a thread through an 8-deep ring (3 before: about 16 KB an SM in flight at 256
# tokens, 17.6 us). The mHC tests and the V4 model tests, then the EP batch-256 step and v4-flash-4
# at batch 64 (both take this kernel) with and without (before-*: git 1d480f9, the third call's build).
#   run(carry=[".device-bin.tar.xz"], timeout_s=280,
#       command="tar xJf .device-bin.tar.xz && GIT_REV=<rev> tools/device/plan_twentyfirst_d.sh")
set -uo pipefail
cd "$(dirname "$0")/../.."
source tools/device/loops.sh
plan_env

echo "== tests"
GTEST_FILTER='CudaLayerOps.Hc*' run_tests "$BIN" "${KTESTS_S:-40}" cuda_layer_ops_test
KRC=$TEST_RC
run_tests "$BIN" "${TESTS_S:-50}" cuda_v4_model_test
[ "$KRC" = 0 ] || TEST_RC=1

echo "== deepinfer bench (box ${BENCH_S:-150} s)"
EP="--synthetic v4-flash-ep8 --batch 256 --prompt-len 512 --gen-len 4"
F4="--synthetic v4-flash:4 --batch 64 --prompt-len 4096 --gen-len 4"
export BENCH_CONFIGS="${BENCH_CONFIGS:-ep256 $EP
before-ep256 $EP
f4b64 $F4
before-f4b64 $F4}"
run_benches "$BIN/deepinfer" "${BENCH_S:-150}"
cp "$OUT"/bench-*.json "$FINAL/" 2>/dev/null
tar czf "$FINAL/logs.tgz" -C "$OUT" .
echo "tests rc=${TEST_RC:-?}"
