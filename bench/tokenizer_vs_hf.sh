#!/usr/bin/env bash
# Ours against HF tokenizers in one command, on this machine, single thread, same corpus:
#   bench/tokenizer_vs_hf.sh [TOKENIZER_JSON [CORPUS_JSONL]] > report.json
# Runs tokenizer_bench (ours: encode parse/text cold+warm, decode) and tests/js/hf_tokenize.mjs bench
# (npm @anush008/tokenizers = HF tokenizers' Rust code), then prints one JSON report: both results,
# ratios, and the identical-ids check on every document (exit 1 if any differs).
# Needs: the tokenizer_bench target built in $BUILD_DIR (default build), node, npm ci --prefix tests/js.
#   REPEATS (ours, default 3), HF_REPEATS (default 2), BUILD_DIR.
set -euo pipefail
cd "$(dirname "$0")/.."
TOK=${1:-tests/data/tokenizer/tokenizer.json}
CORPUS=${2:-tests/data/tokenizer/corpus-shared.jsonl}
BENCH=${BUILD_DIR:-build}/tests/unit/tokenizer/tokenizer_bench
[ -x "$BENCH" ] || { echo "tokenizer_vs_hf.sh: $BENCH not built (ninja -C ${BUILD_DIR:-build} tokenizer_bench)" >&2; exit 1; }
command -v node >/dev/null || { echo "tokenizer_vs_hf.sh: node not found" >&2; exit 1; }
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
# One thread each (HF: RAYON_NUM_THREADS=1; per-document encode() awaited one at a time).
"$BENCH" "$TOK" "$CORPUS" "${REPEATS:-3}" "$tmp/ours_ids.jsonl" > "$tmp/ours.json"
RAYON_NUM_THREADS=1 node tests/js/hf_tokenize.mjs bench "$TOK" "$CORPUS" "${HF_REPEATS:-2}" \
  "$tmp/ours_ids.jsonl" "$tmp/ours.json"
