#!/usr/bin/env bash
# Builds the libFuzzer targets (tests/fuzz: tokenizer encode/decode, streaming output parser, the
# loader: safetensors files and config.json; grammar: EBNF, regex, JSON Schema and tool grammars;
# request: the HTTP routes from body to response) with
# clang + ASan/UBSan in their own build dir and runs each for a bounded time. Exit status non-zero
# on any crash, sanitizer report or failed property. Needs clang and libclang-rt-14-dev (libFuzzer),
# and `npm ci --prefix tests/js` (Unicode 16 tables, as in the normal build).
#   FUZZ_SECONDS   seconds per target (default 60)
#   FUZZ_BUILD_DIR build dir (default build-fuzz)
#   FUZZ_JOBS      ninja -j (default: nproc)
set -euo pipefail
cd "$(dirname "$0")/.."
SECONDS_PER_TARGET=${FUZZ_SECONDS:-60}
BUILD=${FUZZ_BUILD_DIR:-build-fuzz}
TARGETS=(tokenizer_fuzz output_parser_fuzz loader_fuzz grammar_fuzz request_fuzz)

command -v clang++ >/dev/null || { echo "fuzz.sh: clang++ not found (apt-get install -y clang libclang-rt-14-dev)" >&2; exit 1; }
CC=clang CXX=clang++ cmake -S . -B "$BUILD" -G Ninja -DCMAKE_BUILD_TYPE=RelWithDebInfo -DDI_CUDA=OFF \
  -DDI_FUZZ=ON -DDI_UNICODE16=ON "-DDI_SANITIZE=address;undefined" \
  "-DCMAKE_CXX_FLAGS=-fsanitize=fuzzer-no-link -fno-sanitize-recover=undefined" >/dev/null
ninja -C "$BUILD" -j"${FUZZ_JOBS:-$(nproc)}" "${TARGETS[@]}"

status=0
for t in "${TARGETS[@]}"; do
  work="$BUILD/fuzz-$t"
  mkdir -p "$work/corpus" "$work/artifacts"
  # Seeds (kept in the build dir, grown across runs there); committed crash reproducers are
  # regression tests in tests/unit/tokenizer, not seeds.
  cp -n tests/fuzz/seeds/"$t"/* "$work/corpus/" 2>/dev/null || true
  echo "=== $t: ${SECONDS_PER_TARGET}s"
  # timeout: a hard bound above libFuzzer's own (-max_total_time), in case it hangs at exit.
  if ! timeout -k 10 $((SECONDS_PER_TARGET + 60)) "$BUILD/tests/fuzz/$t" \
      -max_total_time="$SECONDS_PER_TARGET" -timeout=20 -rss_limit_mb=4096 -max_len=4096 \
      -print_final_stats=1 -artifact_prefix="$work/artifacts/" "$work/corpus" 2>"$work/log.txt"; then
    status=1
    echo "FAILED: $t (log: $work/log.txt, reproducer: $work/artifacts/)" >&2
    tail -40 "$work/log.txt" >&2
  else
    grep -E '^stat::(number_of_executed_units|peak_rss_mb)|^Done' "$work/log.txt" || tail -3 "$work/log.txt"
  fi
done
exit $status
