#!/usr/bin/env bash
# The forty-first slice's second call: one decode step's kernel timeline at batch 1 and 8 (v4-flash-4,
# ctx 4k, states filled) from CUPTI's records (bench/cuda_util/kernel_trace.cpp preloaded into the
# bench; tools/device/kernel_timeline.py), to see which of the graph's lanes sets the critical path
# now that the attention's xn-only lanes start at hc_pre; then, if TRACE_ONLY is unset, the issue's
# matrix with its transformers peer (plan_matrix.sh, BENCH_S / PEER_S as given).
# Build here: ninja -C build tools/deepinfer/deepinfer kernel_trace; tools/device/pack_bins.sh
#   build/tools/deepinfer/deepinfer build/tests/cuda/libkernel_trace.so; run(carry=[".device-bin.tar.xz"],
#   command="tar xJf .device-bin.tar.xz && tools/device/plan_forty_first_b.sh")
set -uo pipefail
source "$(dirname "$0")/loops.sh"
plan_start
f4="--synthetic v4-flash:4 --gen-len 8 --fill-state --prompt-len 4096"
for b in 1 8; do
  KERNEL_TRACE_OUT="$OUT/trace-b$b.csv" LD_PRELOAD="$PWD/$BIN/libkernel_trace.so" timeout 60 "$BIN/deepinfer" bench \
    --device cuda $f4 --batch $b > "$OUT/trace-bench-b$b.txt" 2>&1
  echo "trace b$b rc=$?: $(grep -E '^kernel_trace|^decode ' "$OUT/trace-bench-b$b.txt" | cut -c1-120 | tr '\n' ' ')"
  python3 tools/device/kernel_timeline.py "$OUT/trace-b$b.csv" > "$FINAL/timeline-b$b.txt" 2>&1
  head -3 "$FINAL/timeline-b$b.txt"; tail -1 "$FINAL/timeline-b$b.txt" | cut -c1-200
done
gzip -f "$OUT"/trace-b*.csv
tar czf "$FINAL/trace-logs.tgz" -C "$OUT" .
echo "traces done ($((SECONDS - START)) s)"
[ -n "${TRACE_ONLY:-}" ] && exit 0
OUT="$FINAL" tools/device/plan_matrix.sh  # its results beside the traces
