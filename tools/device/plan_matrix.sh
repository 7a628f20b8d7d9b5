#!/usr/bin/env bash
# The issue's benchmark matrix in one call, once `--fill-state` has landed
# (tools/device/pending/twentyfourth-fill-state.patch): decode of the synthetic V4-Flash
# (v4-flash:4, the layers the issue's peer numbers use) at batch 1, 8, 32, 64, 128, 256 and
# contexts 4096 and 32768, each state filled instead of prefilled; the EP slice at batch 256,
# contexts 4096 and 32768 (filled); prefill at 1k-32k tokens (batch 1, real prefill). Every run's
# JSON is merged on the device by collect_bench.py into one file ($FINAL/matrix.json, the results
# format, with the transformers rows of bench/results/peer-transformers-h100.json where the shapes
# match); the single runs stay in logs.tgz.
# Build (here): T=build; tools/device/pack_bins.sh build/tools/deepinfer/deepinfer
#   run(carry=[".device-bin.tar.xz"], timeout_s=590,
#       command="tar xJf .device-bin.tar.xz && GIT_REV=<rev> MACHINE='<card>' tools/device/plan_matrix.sh")
# A box of BENCH_S seconds (default 500) bounds the runs; what did not fit is named "skipped".
# Memory: compressed entries grow by doubling (GpuCompressorState::reserve), so a CSA layer at 32k
# holds 16,384 rows of KV and indexer keys (~20 MB a sequence); the EP slice at batch 256 and
# context 32768 then needs roughly 28 GB of weights + 55-110 GB of state: the H200 only (on an H100
# the run stops with an out-of-memory error naming the buffer).
set -uo pipefail
source "$(dirname "$0")/loops.sh"
plan_start

F4="--synthetic v4-flash:4"
EP="--synthetic v4-flash-ep8"
configs=""
for ctx in 4096 32768; do
  for b in 1 8 32 64 128 256; do
    configs+="f4b${b}c${ctx} $F4 --batch $b --prompt-len $ctx --gen-len 8 --fill-state"$'\n'
  done
  configs+="epb256c${ctx} $EP --batch 256 --prompt-len $ctx --gen-len 4 --fill-state"$'\n'
done
for p in 1024 2048 4096 8192 16384 32768; do
  configs+="f4p${p} $F4 --batch 1 --prompt-len $p --gen-len 2"$'\n'
done
export BENCH_CONFIGS="${BENCH_CONFIGS:-$configs}"
run_benches "$BIN/deepinfer" "${BENCH_S:-500}"
python3 tools/device/collect_bench.py --machine "${MACHINE:-$(nvidia-smi --query-gpu=name --format=csv,noheader | head -1)}" \
  --git-rev "${GIT_REV:-?}" --command "deepinfer bench --device cuda (tools/device/plan_matrix.sh: the issue's matrix)" \
  --peer bench/results/peer-transformers-h100.json "$OUT"/bench-*.json > "$FINAL/matrix.json" ||
  echo "collect_bench.py failed"
tar czf "$FINAL/logs.tgz" -C "$OUT" .
echo "($((SECONDS - START)) s)"
