#!/usr/bin/env bash
# Set up, build, and run the engine on the small model shipped in the repo.
# Installs the Debian packages the build needs (sudo when not root), configures with CMake,
# builds with Ninja, then generates greedily from two prompts on tests/data/tiny-v4-b.
set -euo pipefail
cd "$(dirname "$0")/.."

PACKAGES=(build-essential cmake ninja-build pkg-config
          nlohmann-json3-dev libcli11-dev libgtest-dev libgmock-dev libbenchmark-dev
          libpcre2-dev libutf8proc-dev libxxhash-dev zlib1g-dev
          libcpp-httplib-dev python3-numpy)
missing=()
for p in "${PACKAGES[@]}"; do dpkg -s "$p" >/dev/null 2>&1 || missing+=("$p"); done
if [ ${#missing[@]} -gt 0 ]; then
  SUDO=""; [ "$(id -u)" -ne 0 ] && SUDO="sudo"
  $SUDO apt-get update -qq
  DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq "${missing[@]}"
fi

BUILD_DIR=${BUILD_DIR:-build}
cmake -S . -B "$BUILD_DIR" -G Ninja -DCMAKE_BUILD_TYPE=Release ${CMAKE_ARGS:-}
ninja -C "$BUILD_DIR"

if [ "${SKIP_DEMO:-0}" != "1" ]; then
  out=$(mktemp)
  "$BUILD_DIR/tools/deepinfer/deepinfer" inspect tests/data/tiny-v4-b
  "$BUILD_DIR/tools/deepinfer/deepinfer" generate tests/data/tiny-v4-b --input examples/prompts.jsonl --output "$out"
  echo "--- generated (greedy, tiny-v4-b):"
  cat "$out"
  rm -f "$out"
fi
