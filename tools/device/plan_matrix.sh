#!/usr/bin/env bash
# The issue's benchmark matrix in one call, once `--fill-state` has landed
# (tools/device/pending/twentyfourth-fill-state.patch): decode of the synthetic V4-Flash
# (v4-flash:4, the layers the issue's peer numbers use) at batch 1, 8, 32, 64, 128, 256 and
# contexts 4096 and 32768, each state filled instead of prefilled; the EP slice at batch 256,
# contexts 4096 and 32768 (filled); prefill at 1k-32k tokens (batch 1, real prefill). Then, in the
# same call, the peer: transformers (bench/peer_transformers.py, bf16) on the same shapes, cheapest
# first within its own box (its contexts are prefilled, so the large 32k rows fall to the box; its
# eager attention cannot prefill 32k tokens at once, so its prefill rows stop at 16k). Every run's
# JSON is merged on the device by collect_bench.py into one file ($FINAL/matrix.json, the results
# format, the peer column from this call's peer.json, else from bench/results/peer-transformers-h100-matrix.json);
# the single runs stay in logs.tgz, the peer's file in $FINAL/peer.json.
# Build (here): T=build; tools/device/pack_bins.sh build/tools/deepinfer/deepinfer
#   run(carry=[".device-bin.tar.xz"], timeout_s=590,
#       command="tar xJf .device-bin.tar.xz && GIT_REV=<rev> MACHINE='<card>' tools/device/plan_matrix.sh")
# BENCH_CONFIGS, when set and not empty, replaces the matrix's rows (a calling plan that exported its own
# must empty it). Boxes: BENCH_S seconds (default 330) for deepinfer, PEER_S (default 200) for transformers; what
# did not fit is named "skipped" (deepinfer) or has "error": "time budget" (peer). PEER_S=0: no peer.
# Memory: a CSA layer's compressed entries at 32k are 8,193 rows of KV and indexer keys, ~10.5 MB
# a sequence (GpuCompressorState::grown_capacity; twice that with the doubling before it), ~220 MB
# over the EP slice's 21 CSA layers: at batch 256 and context 32768 ~28 GB of weights + ~56 GB of
# state, an H200's (on an H100 the run may stop with an out-of-memory error naming the buffer).
set -uo pipefail
source "$(dirname "$0")/loops.sh"
plan_start

F4="--synthetic v4-flash:4"
EP="--synthetic v4-flash-ep8"
# In the order of the issue's targets, so a short box cuts the 32k rows first: decode at 4k,
# the EP row, the prefills, then decode at 32k.
decode_rows() {
  local b
  for b in 1 8 32 64 128 256; do
    configs+="f4b${b}c$1 $F4 --batch $b --prompt-len $1 --gen-len 8 --fill-state"$'\n'
  done
  configs+="epb256c$1 $EP --batch 256 --prompt-len $1 --gen-len 4 --fill-state"$'\n'
}
configs=""
decode_rows 4096
for p in 1024 2048 4096 8192 16384 32768; do
  configs+="f4p${p} $F4 --batch 1 --prompt-len $p --gen-len 2"$'\n'
done
decode_rows 32768
export BENCH_CONFIGS="${BENCH_CONFIGS:-$configs}"
run_benches "$BIN/deepinfer" "${BENCH_S:-330}"
PEER=${PEER_FILE:-bench/results/peer-transformers-h100-matrix.json}  # the latest H100 peer run (24th slice); on an H200: PEER_FILE=bench/results/peer-transformers-h200-matrix.json
if [ "${PEER_S:-200}" -gt 30 ]; then
  echo "== peer: transformers (box ${PEER_S:-200} s)"
  timeout "${PEER_S:-200}" python3 bench/peer_transformers.py --out "$OUT/peer.json" --time-budget $((${PEER_S:-200} - 40)) \
    --batches 1,8,32,64,128,256 --contexts 4096,32768 --prefill-tokens 1024,2048,4096,8192,16384 > "$OUT/peer.txt" 2>&1
  echo "peer rc=$?"; grep -E "  -> " "$OUT/peer.txt" | cut -c1-160
  [ -s "$OUT/peer.json" ] && PEER="$OUT/peer.json" && cp "$OUT/peer.json" "$FINAL/peer.json"
fi
python3 tools/device/collect_bench.py --machine "${MACHINE:-$(nvidia-smi --query-gpu=name --format=csv,noheader | head -1)}" \
  --git-rev "${GIT_REV:-?}" --command "deepinfer bench --device cuda, then bench/peer_transformers.py (tools/device/plan_matrix.sh: the issue's matrix)" \
  --peer "$PEER" "$OUT"/bench-*.json > "$FINAL/matrix.json" || echo "collect_bench.py failed"
python3 tools/device/results_table.py "$FINAL/matrix.json" --targets || echo "results_table.py failed"
tar czf "$FINAL/logs.tgz" -C "$OUT" .
echo "($((SECONDS - START)) s)"
