#!/usr/bin/env bash
# RAN on an H100 2026-12-06 (09:25 UTC session) and landed; was pending as twentyeighth-indexer-ldmatrix.patch. The twenty-eighth
# slice: the indexer score kernel's fragments by ldmatrix (written 2026-12-06 on
# 9312143). Its m16n8k16 fragments had been loaded one 32-bit shared load per register (40 loads
# per k16 step per warp for 32 MMAs); ldmatrix.x4 gives the same registers in a quarter of the
# instructions (the sums are bitwise the kernel's before). The EP step spent 66 us a CSA layer
# there (~3x its bytes, H100 ncu), the 8k prefill 1.62 ms.
# Build (here): /tmp/deepinfer-before and /tmp/cuda_compress_test-before = 9312143's; ninja -C build
#   deepinfer cuda_compress_test cuda_v4_model_test cuda_v4_synthetic_test cuda_v4_engine_test;
#   tools/device/pack_bins.sh build/tools/deepinfer/deepinfer /tmp/deepinfer-before
#   build/tests/cuda/{cuda_compress_test,cuda_v4_model_test,cuda_v4_synthetic_test,cuda_v4_engine_test}
#   /tmp/cuda_compress_test-before
#   run(carry=[".device-bin.tar.xz"], timeout_s=200, command="tar xJf .device-bin.tar.xz &&
#       GIT_REV=<rev> tools/device/plan_twentyeighth_i.sh")
set -uo pipefail
source "$(dirname "$0")/loops.sh"
plan_start

echo "== tests"
run_test_specs 40:cuda_compress_test:CudaCompress.Indexer*:CudaCompress.Decode*:CudaCompress.Prefill* 60:cuda_v4_model_test 40:cuda_v4_synthetic_test
echo "== indexer_select alone, before / after (CudaCompress.Timing)"
for b in cuda_compress_test-before cuda_compress_test; do
  GTEST_FILTER=CudaCompress.Timing timeout 40 "$BIN/$b" > "$OUT/timing-$b.txt" 2>&1
  echo "$b rc=$?: $(grep -E 'timing indexer_select' "$OUT/timing-$b.txt" | cut -c1-150)"
done

echo "== deepinfer bench, before / after"
export BENCH_CONFIGS="${BENCH_CONFIGS:-$(ab_pairs "ep256c4k --synthetic v4-flash-ep8 --batch 256 --gen-len 4 --fill-state --prompt-len 4096
p8k --synthetic v4-flash:4 --batch 1 --prompt-len 8192 --gen-len 2")}"
run_benches "$BIN/deepinfer" "${BENCH_S:-70}" | grep -E "rc=|^decode |^prefill |^decode step parts" | cut -c1-150
tar czf "$FINAL/runs.tgz" -C "$OUT" .
echo "tests rc=${TEST_RC:-?} ($((SECONDS - START)) s)"
