#!/usr/bin/env bash
# Here (the development machine): the before / after binaries of a pending A/B, packed for the
# device call. Usage: tools/device/build_pending_ab.sh "BASE_PATCHES" "CHANGE_PATCHES"
#   BASE_PATCHES: patches applied to both builds (e.g. a bench mode the comparison needs);
#   CHANGE_PATCHES: the change under test. Both space-separated, paths from the repository root.
# Applies BASE_PATCHES, builds deepinfer, cuda_ops_bench and cuda_attn_lt_bench as
# /tmp/deepinfer-before, /tmp/cuda_ops_bench-before and /tmp/cuda_attn_lt_bench-before, applies
# CHANGE_PATCHES (their new files marked intent-to-add), builds the same and the CUDA test
# binaries the plans run, and packs them
# (pack_bins.sh) into .device-bin.tar.xz. The working tree keeps every patch applied (commit it
# after the device run passes, or `git checkout -- . && git clean` the patched files).
# E.g. for plan_twentyfourth.sh:
#   tools/device/build_pending_ab.sh tools/device/pending/twentyfourth-route-bench.patch \
#     "tools/device/pending/twentyfourth-router-staged.patch tools/device/pending/twentyfourth-fill-state.patch
#      tools/device/pending/twentyfourth-tidy.patch tools/device/pending/twentyfifth-ordered-state.patch
#      tools/device/pending/twentyfifth-device-memory.patch"
set -euo pipefail
cd "$(dirname "$0")/../.."
base=${1:-} change=${2:?usage: build_pending_ab.sh BASE_PATCHES CHANGE_PATCHES}
[ -z "$(git status --porcelain --untracked-files=no)" ] || { echo "the working tree has changes: commit or stash first"; exit 1; }
# shellcheck disable=SC2086
[ -z "$base" ] || git apply $base
ninja -C build deepinfer cuda_ops_bench cuda_attn_lt_bench
cp build/tools/deepinfer/deepinfer /tmp/deepinfer-before
cp build/tests/cuda/cuda_ops_bench /tmp/cuda_ops_bench-before
cp build/tests/cuda/cuda_attn_lt_bench /tmp/cuda_attn_lt_bench-before
# shellcheck disable=SC2086
git apply $change
{ git status --porcelain | awk '$1 == "??" {print $2}' | grep -E '^src/|^tests/|^bench/' || true; } | xargs -r git add -N
T=build/tests/cuda
ninja -C build deepinfer cuda_ops_bench cuda_attn_lt_bench cuda_layer_ops_test cuda_experts_test cuda_attn_lt_test cuda_v4_model_test \
  cuda_v4_synthetic_test cuda_v4_engine_test
tools/device/pack_bins.sh build/tools/deepinfer/deepinfer /tmp/deepinfer-before $T/cuda_layer_ops_test $T/cuda_experts_test $T/cuda_attn_lt_test \
  $T/cuda_v4_model_test $T/cuda_v4_synthetic_test $T/cuda_v4_engine_test $T/cuda_ops_bench /tmp/cuda_ops_bench-before \
  $T/cuda_attn_lt_bench /tmp/cuda_attn_lt_bench-before
