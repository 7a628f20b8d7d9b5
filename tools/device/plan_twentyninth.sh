#!/usr/bin/env bash
# RAN on an H100 2026-12-06 (09:33 UTC), DROPPED (slower: experts alone 4.75 -> 4.91 ms at the 8k prefill shape). The twenty-ninth slice: the FP8 expert kernel's fragment in two halves (mxfp4_fp8.cu, P = 2 at
# widths >= 32): half 0 promoted while half 1 runs, so the tensor pipe idles for half a promotion a
# chunk. Written 2026-12-06 on 28c0f3d. A / B against that commit's build (the "-before" binaries).
# Build (here): /tmp/deepinfer-before, /tmp/cuda_ops_bench-before = 28c0f3d's; ninja -C build deepinfer
#   cuda_ops_bench cuda_layer_ops_test cuda_v4_model_test cuda_v4_synthetic_test;
#   tools/device/pack_bins.sh build/tools/deepinfer/deepinfer /tmp/deepinfer-before
#   build/tests/cuda/{cuda_ops_bench,cuda_layer_ops_test,cuda_v4_model_test,cuda_v4_synthetic_test}
#   /tmp/cuda_ops_bench-before
#   run(carry=[".device-bin.tar.xz"], timeout_s=300, command="tar xJf .device-bin.tar.xz &&
#       GIT_REV=<rev> tools/device/plan_twentyninth.sh")
set -uo pipefail
source "$(dirname "$0")/loops.sh"
plan_start

echo "== tests"
run_test_specs 60:cuda_layer_ops_test:CudaLayerOps.Fp8*:CudaLayerOps.Moe*:CudaLayerOps.Wide* 60:cuda_v4_model_test 40:cuda_v4_synthetic_test
echo "== the expert paths alone, before / after (cuda_ops_bench moe:E:m; prefill 8k = E256 x 192 rows, EP b256 = E32 x 48)"
for shape in 256:192 32:48 256:24 32:12; do
  for b in cuda_ops_bench-before cuda_ops_bench; do
    timeout 60 "$BIN/$b" "$OUT/ops-$b-${shape/:/x}.json" "${GIT_REV:-?}" "moe:$shape" > "$OUT/ops-$b-${shape/:/x}.txt" 2>&1
    echo "$b moe:$shape rc=$?: $(grep -E '^moe_fp8 ' "$OUT/ops-$b-${shape/:/x}.txt" | cut -c1-110)"
  done
done

echo "== deepinfer bench, before / after"
export BENCH_CONFIGS="${BENCH_CONFIGS:-$(ab_pairs "ep256c4k --synthetic v4-flash-ep8 --batch 256 --gen-len 4 --fill-state --prompt-len 4096
p8k --synthetic v4-flash:4 --batch 1 --prompt-len 8192 --gen-len 2
b64 --synthetic v4-flash:4 --batch 64 --gen-len 8 --fill-state --prompt-len 4096")}"
run_benches "$BIN/deepinfer" "${BENCH_S:-90}" | grep -E "rc=|^decode |^prefill |^decode step parts" | cut -c1-150
tar czf "$FINAL/runs.tgz" -C "$OUT" .
echo "tests rc=${TEST_RC:-?} ($((SECONDS - START)) s)"
