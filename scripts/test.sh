#!/usr/bin/env bash
# The test command: set up and build (scripts/setup.sh, without the demo), run every CTest test
# (labels unit, golden, e2e; cuda tests skip without a GPU), then the fuzzers for a bounded time.
# Extra arguments go to ctest (e.g. -L unit). FUZZ_SECONDS=0 skips the fuzzers.
set -euo pipefail
cd "$(dirname "$0")/.."
SKIP_DEMO=1 scripts/setup.sh
ctest --test-dir "${BUILD_DIR:-build}" --output-on-failure -j"$(nproc)" "$@"
if [ "${FUZZ_SECONDS:-30}" != "0" ]; then
  FUZZ_SECONDS=${FUZZ_SECONDS:-30} scripts/fuzz.sh
fi
