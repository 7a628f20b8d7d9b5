#!/usr/bin/env bash
# The A/B of tools/device/pending/fortieth-c-xn-lanes.patch (written 2026-12-07 ~13:30 UTC on 387bd71,
# applies to 0e5899a and later): the attention's xn-only paths (the K=V row, the KV compressor, the
# indexer-key compressor, the indexer head weights on a lane of its own) forked right after hc_pre,
# before wq_a and q_norm; the indexer queries' lane after q_norm, joined with the rest before the
# attention. Its tests passed on an H100 at 14:41 UTC the day it was written (model 7, synthetic 10,
# engine 6, with the dropped wo_b patch in the same build; plan_fortieth_c.sh); no device time was
# left for its benches; since then only its launches' issue order changed (the same stream
# dependencies; README). Land it if batch 1 / 8 / the EP step gain.
# Build here, from a clean tree: ninja -C build tools/deepinfer/deepinfer; cp build/tools/deepinfer/deepinfer
#   /tmp/before/deepinfer-before; git apply tools/device/pending/fortieth-c-xn-lanes.patch; ninja -C build;
#   tools/device/pack_bins.sh build/tools/deepinfer/deepinfer build/tests/cuda/{cuda_v4_model_test,
#   cuda_v4_synthetic_test,cuda_v4_engine_test} /tmp/before/deepinfer-before; run(carry=[".device-bin.tar.xz"],
#   timeout_s=300, command="tar xJf .device-bin.tar.xz && tools/device/plan_fortieth_d.sh")
set -uo pipefail
source "$(dirname "$0")/loops.sh"
plan_start
run_test_specs 80:cuda_v4_model_test 90:cuda_v4_synthetic_test 80:cuda_v4_engine_test
echo "tests rc=${TEST_RC:-?} ($((SECONDS - START)) s)"
export BENCH_CONFIGS="$(decode_ab_configs "b1 b8 ep256 b1b b2 b8b b32 b1c")
$(ab_pairs "p8k --synthetic v4-flash:4 --batch 1 --prompt-len 8192 --gen-len 2")"
run_benches "$BIN/deepinfer" 150 | grep -E "rc=[1-9]" | cut -c1-150
bench_device_ms
plan_finish
echo "done ($((SECONDS - START)) s)"
