#!/usr/bin/env bash
# Set up, build, and run the engine on the small model shipped in the repo.
# Installs the Debian packages the build needs (sudo when not root) and the npm packages of
# tests/js (Unicode 16 data for the tokenizer build, test clients), configures with CMake, builds
# with Ninja, then serves tests/data/tiny-v4-b on loopback and sends it one chat request.
set -euo pipefail
cd "$(dirname "$0")/.."

PACKAGES=(build-essential cmake ninja-build pkg-config curl
          nlohmann-json3-dev libcli11-dev libgtest-dev libgmock-dev libbenchmark-dev
          libpcre2-dev libutf8proc-dev libxxhash-dev zlib1g-dev libcpp-httplib-dev
          clang libclang-rt-14-dev python3-numpy)
missing=()
for p in "${PACKAGES[@]}"; do dpkg -s "$p" >/dev/null 2>&1 || missing+=("$p"); done
if [ ${#missing[@]} -gt 0 ]; then
  SUDO=""; [ "$(id -u)" -ne 0 ] && SUDO="sudo"
  $SUDO apt-get update -qq
  DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq "${missing[@]}"
fi
# Node.js and npm (tests/js: Unicode 16 data for the build, ajv, openai, HF tokenizers): Debian's
# packages unless a node is already installed (e.g. a newer one from elsewhere).
if ! command -v node >/dev/null || ! command -v npm >/dev/null; then
  SUDO=""; [ "$(id -u)" -ne 0 ] && SUDO="sudo"
  $SUDO apt-get update -qq
  DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq nodejs npm
fi
npm ci --prefix tests/js --no-audit --no-fund --loglevel=error

BUILD_DIR=${BUILD_DIR:-build}
cmake -S . -B "$BUILD_DIR" -G Ninja -DCMAKE_BUILD_TYPE=Release -DDI_UNICODE16=ON ${CMAKE_ARGS:-}
ninja -C "$BUILD_DIR"

if [ "${SKIP_DEMO:-0}" != "1" ]; then
  BIN="$BUILD_DIR/tools/deepinfer/deepinfer"
  "$BIN" inspect tests/data/tiny-v4-b
  PORT=${PORT:-18089}
  "$BIN" serve tests/data/tiny-v4-b --port "$PORT" &
  SERVER=$!
  trap 'kill $SERVER 2>/dev/null || true' EXIT
  for _ in $(seq 100); do curl -sf "http://127.0.0.1:$PORT/health" >/dev/null && break; sleep 0.1; done
  echo "--- POST /v1/chat/completions (tiny-v4-b has random weights: the text is noise)"
  curl -s "http://127.0.0.1:$PORT/v1/chat/completions" -H 'Content-Type: application/json' \
    -d '{"model": "tiny-v4-b", "messages": [{"role": "user", "content": "Hello!"}], "max_tokens": 16, "seed": 1}'
  echo
  kill -TERM $SERVER; wait $SERVER 2>/dev/null || true
fi
