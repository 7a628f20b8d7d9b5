#!/usr/bin/env bash
# Here (the development machine): copy the GoogleTest sources and the nlohmann/json headers that
# the device lacks into the ignored folder .device-deps/, to be named in the device call's `carry`.
set -euo pipefail
cd "$(dirname "$0")/../.."
rm -rf .device-deps && mkdir -p .device-deps/include
cp -r /usr/src/googletest .device-deps/googletest
cp -r /usr/include/nlohmann .device-deps/include/nlohmann
du -sh .device-deps
