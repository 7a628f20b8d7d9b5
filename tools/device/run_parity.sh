#!/usr/bin/env bash
# One device call: build every CUDA parity test (ninja -k 0: one broken target does not stop the
# others), run each under a time box, then (PEER=1) the transformers peer script. Results to $OUT.
# Run from the repository root on the GPU machine with .device-deps carried (tools/device/prepare.sh).
set -uo pipefail
OUT=${OUT:-/tmp/out}
mkdir -p "$OUT"
log() { echo "== $*"; }
{
  log "device"; nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.mem,temperature.gpu --format=csv
  nvcc --version | tail -1
} 2>&1 | tee "$OUT/env.txt"
J=$(nproc)
TESTS=${TESTS:-"cuda_ops_test cuda_attn_lt_test cuda_layer_ops_test cuda_model_ops_test cuda_compress_test cuda_sampling_test"}
log "googletest"
cmake -S .device-deps/googletest -B /tmp/gtb -G Ninja -DCMAKE_BUILD_TYPE=Release -DBUILD_GMOCK=OFF \
  -DCMAKE_INSTALL_PREFIX=/tmp/gt > /tmp/gt.log 2>&1 && ninja -C /tmp/gtb install >> /tmp/gt.log 2>&1 \
  || { tail -30 /tmp/gt.log; exit 1; }
log "configure + build: $TESTS ${EXTRA_TARGETS:-}"
T0=$(date +%s)
cmake -S tools/device -B /tmp/bd -G Ninja -DCMAKE_CUDA_ARCHITECTURES=90a -DCMAKE_PREFIX_PATH=/tmp/gt > "$OUT/build.log" 2>&1 \
  || { tail -40 "$OUT/build.log"; exit 1; }
ninja -C /tmp/bd -k 0 -j"$J" $TESTS ${EXTRA_TARGETS:-} >> "$OUT/build.log" 2>&1 || { grep -E "error|FAILED" "$OUT/build.log" | head -30; }
echo "build took $(( $(date +%s) - T0 )) s"
SUMMARY=""
for t in $TESTS; do
  if [ ! -x /tmp/bd/tests_cuda/$t ]; then SUMMARY="$SUMMARY $t=NOBUILD"; continue; fi
  log "$t"
  timeout ${TEST_TIMEOUT:-150} /tmp/bd/tests_cuda/$t 2>&1 | tee "$OUT/$t.txt" | grep -vE "^\[ +(RUN|OK) " | tail -${TAIL:-25}
  SUMMARY="$SUMMARY $t=${PIPESTATUS[0]}"
done
if [ "${PEER:-0}" = 1 ]; then
  log "transformers peer"
  timeout ${PEER_TIMEOUT:-260} python3 bench/peer_transformers.py --out "$OUT/peer.json" --time-budget ${PEER_BUDGET:-230} > "$OUT/peer.txt" 2>&1
  echo "peer rc=$?"; tail -25 "$OUT/peer.txt"
fi
nvidia-smi --query-gpu=clocks.sm,clocks.mem,temperature.gpu --format=csv,noheader | tee -a "$OUT/env.txt"
echo "SUMMARY:$SUMMARY"
