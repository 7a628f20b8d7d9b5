#!/usr/bin/env bash
# One device call for the whole-model bench (issue 5, D): configure + build the CUDA targets
# (tools/device/CMakeLists.txt), run every CUDA parity test (cuda_*_test), run the transformers
# peer (bench/peer_transformers.py; a failure only loses the peer column), then the model bench
# with --peer; results and logs in $OUT. Run from the repository root on the GPU machine with
# .device-deps carried (tools/device/prepare.sh: GoogleTest + nlohmann/json). Every part is
# time-boxed so the whole call stays under 9 minutes (sum of the boxes: 530 s with the defaults).
# PARITY_S: the parity box (default 50 s); PEER=0 skips the peer (PEER_FILE: reuse a peer.json).
set -uo pipefail
source tools/device/common.sh
REV=${GIT_REV:-$(git rev-parse --short HEAD 2>/dev/null || echo unknown)}
log "build (box 100 s bench + TESTS_BUILD_S tests)"
TESTS=$(ninja -C /tmp/bd -t targets all | grep -oE '^cuda_[a-z0-9_]+_test:' | tr -d ':' | sort -u | tr '\n' ' ')
echo "tests: $TESTS"
timeout 100 ninja -C /tmp/bd -j"$J" cuda_model_bench >> "$OUT/build.log" 2>&1  # the bench first
BUILD_RC=$?
timeout ${TESTS_BUILD_S:-40} ninja -C /tmp/bd -j"$J" -k 0 $TESTS >> "$OUT/build.log" 2>&1 || BUILD_RC=$?
grep -E "error|FAILED" "$OUT/build.log" | head -20
[ -x /tmp/bd/tests_cuda/cuda_model_bench ] || { echo "cuda_model_bench did not build (rc $BUILD_RC)"; tail -40 "$OUT/build.log"; exit 1; }
PARITY_S=${PARITY_S:-50}
log "parity tests (box $PARITY_S s in all)"
source tools/device/loops.sh
# shellcheck disable=SC2086
run_tests /tmp/bd/tests_cuda "$PARITY_S" $TESTS
PEER_RC=skipped
if [ "${PEER:-1}" = 1 ]; then
  log "peer: transformers (box 140 s)"
  timeout 140 python3 bench/peer_transformers.py --out "$OUT/peer.json" --time-budget 110 > "$OUT/peer.txt" 2>&1
  PEER_RC=$?
  tail -15 "$OUT/peer.txt"
elif [ -n "${PEER_FILE:-}" ]; then
  cp "$PEER_FILE" "$OUT/peer.json"  # an earlier call's peer rows (same config)
fi
log "model bench (box 140 s)"
timeout 140 /tmp/bd/tests_cuda/cuda_model_bench --out "$OUT/cuda-model-h200.json" --peer "$OUT/peer.json" \
  --rev "$REV" --time-budget 100 2>&1 | tee "$OUT/bench-model.txt" | grep -vE "^note: cuBLASLt" | tail -120
BENCH_RC=${PIPESTATUS[0]}
nvidia-smi --query-gpu=clocks.sm,clocks.mem,temperature.gpu --format=csv,noheader | tee -a "$OUT/env.txt"
echo "build rc=$BUILD_RC parity rc=$TEST_RC peer rc=$PEER_RC bench rc=$BENCH_RC"
