#!/usr/bin/env bash
# One device call with binaries built on the development machine only (no build on the device;
# tools/device/pack_bins.sh carries them and the libraries the machine lacks in .device-bin):
#   1. the carried CUDA test binaries named in TESTS (default: every .device-bin/bin/cuda_*_test),
#      each time-boxed within TESTS_S seconds in all;
#   1b. with SANITIZE="TOOL:TEST:FILTER[;...]": compute-sanitizer over those tests (run_sanitized
#      in loops.sh), within SAN_S seconds in all;
#   2. `deepinfer bench --device cuda ARGS` for each line "NAME ARGS" of BENCH_CONFIGS, within
#      BENCH_S seconds in all (JSON per line);
#   2b. with OPS_BENCH="ARGS[;ARGS...]" and cuda_ops_bench carried: the op bench (ARGS "moe": the
#      routed expert paths only) once per argument set and per binary of OPS_BINS (default
#      cuda_ops_bench), within OPS_S seconds in all;
#   3. with TOKENIZER=1 and tokenizer_bench carried: ours against HF tokenizers' Python package
#      on this machine, one thread (bench/tokenizer_vs_hf_py.py), within TOK_S seconds.
# A call returns at most 8 files: every log is packed into $OUT/logs.tgz; the bench JSON files
# (at most 6) and the tokenizer report are copied beside it. Run from the repository root on the
# GPU machine with .device-bin carried.
set -uo pipefail
FINAL=${OUT:-/tmp/out}
mkdir -p "$FINAL"
OUT=/tmp/session-out
rm -rf "$OUT" && mkdir -p "$OUT"
log() { echo "== $* ($(date +%T))"; }
{
  log "device"
  nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.mem,temperature.gpu,memory.used,memory.total --format=csv
  nproc; ldd --version | head -1
} 2>&1 | tee "$OUT/env.txt"
CUDA_LIB=$(dirname "$(dirname "$(command -v nvcc)")")
export LD_LIBRARY_PATH="$PWD/.device-bin/lib:$CUDA_LIB/lib64:$CUDA_LIB/lib:$CUDA_LIB/targets/x86_64-linux/lib:${LD_LIBRARY_PATH:-}"
DI=.device-bin/bin/deepinfer
if ! "$DI" devices > "$OUT/devices.txt" 2>&1; then
  export LD_LIBRARY_PATH="$PWD/.device-bin/lib-stdcxx:$LD_LIBRARY_PATH"
  "$DI" devices > "$OUT/devices.txt" 2>&1 || { echo "carried deepinfer does not run:"; cat "$OUT/devices.txt"; ldd "$DI" | grep -i "not found"; }
fi
cat "$OUT/devices.txt"

log "carried tests (box ${TESTS_S:-200} s in all)"
TESTS=${TESTS:-$(cd .device-bin/bin && ls cuda_*_test 2>/dev/null | tr '\n' ' ')}
source tools/device/loops.sh
# shellcheck disable=SC2086
run_tests .device-bin/bin "${TESTS_S:-200}" $TESTS

if [ -n "${SANITIZE:-}" ]; then
  log "compute-sanitizer (box ${SAN_S:-120} s in all)"
  IFS=';' read -ra SAN_SPECS <<< "$SANITIZE"
  run_sanitized .device-bin/bin "${SAN_S:-120}" "${SAN_SPECS[@]}"
fi

if [ -n "${OPS_BENCH:-}" ] && [ -x .device-bin/bin/cuda_ops_bench ]; then
  log "cuda_ops_bench $OPS_BENCH with ${OPS_BINS:-cuda_ops_bench} (box ${OPS_S:-90} s in all)"
  # OPS_BENCH: argument sets separated by ';', each run by every binary of OPS_BINS in turn (an A/B
  # of two builds of the bench in one call); the JSON of run n of binary B is bench-ops-B-n.json.
  OPS_END=$((SECONDS + ${OPS_S:-90}))
  IFS=';' read -ra OPS_SETS <<< "$OPS_BENCH"
  n=0
  for args in "${OPS_SETS[@]}"; do
    n=$((n + 1))
    for b in ${OPS_BINS:-cuda_ops_bench}; do
      left=$((OPS_END - SECONDS))
      [ "$left" -gt 5 ] || { echo "ops bench: box spent before $b $args"; break 2; }
      echo "-- $b $args" >> "$OUT/ops-bench.txt"
      # shellcheck disable=SC2086
      timeout "$left" ".device-bin/bin/$b" "$OUT/bench-ops-$b-$n.json" "${GIT_REV:-unknown}" $args \
        >> "$OUT/ops-bench.txt" 2>&1
      echo "ops bench $b $args rc=$?"
    done
  done
  grep -vE "^(ceiling|measur)" "$OUT/ops-bench.txt" | cut -c1-170 | tail -40
fi

log "deepinfer bench --synthetic (box ${BENCH_S:-250} s in all)"
run_benches "$DI" "${BENCH_S:-250}"

if [ "${TOKENIZER:-0}" = 1 ] && [ -x .device-bin/bin/tokenizer_bench ]; then
  log "tokenizer: ours vs HF tokenizers (Python), one thread (box ${TOK_S:-120} s)"
  timeout "${TOK_S:-120}" python3 bench/tokenizer_vs_hf_py.py .device-bin/bin/tokenizer_bench \
    tests/data/tokenizer/tokenizer.json tests/data/tokenizer/corpus-shared.jsonl 3 \
    > "$OUT/tokenizer-vs-hf-py.json" 2> "$OUT/tokenizer-vs-hf-py.err"
  echo "tokenizer rc=$?"; tail -3 "$OUT/tokenizer-vs-hf-py.err"
  python3 - "$OUT/tokenizer-vs-hf-py.json" <<'EOF' || true
import json, sys
r = json.load(open(sys.argv[1]))
print("identical:", r["identical"], {k: round(v, 2) for k, v in r["ratios_ours_over_hf"].items()})
print("hf:", r["hf"]["package"], {k: round(r["hf"][k]["MBps"], 2) for k in ("encode_parse", "encode_text")})
print("ours:", {k: round(r["ours"][k]["warm_MBps"], 2) for k in ("encode_parse", "encode_text")})
EOF
  cp "$OUT/tokenizer-vs-hf-py.json" "$FINAL/" 2>/dev/null
fi
nvidia-smi --query-gpu=clocks.sm,clocks.mem,temperature.gpu --format=csv,noheader | tee -a "$OUT/env.txt"
tar czf "$FINAL/logs.tgz" -C "$OUT" .
ls "$OUT"/bench-*.json 2>/dev/null | grep -v bench-ops- | head -6 | xargs -r -I{} cp {} "$FINAL/"
echo "tests rc=$TEST_RC"
