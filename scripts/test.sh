#!/usr/bin/env bash
# The test command: set up and build (scripts/setup.sh, without the demo), then run every CTest
# test (labels unit, golden, e2e). Extra arguments go to ctest (e.g. -L unit).
set -euo pipefail
cd "$(dirname "$0")/.."
SKIP_DEMO=1 scripts/setup.sh
ctest --test-dir "${BUILD_DIR:-build}" --output-on-failure -j"$(nproc)" "$@"
