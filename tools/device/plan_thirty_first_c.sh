#!/usr/bin/env bash
# RAN on an H100 on 2026-12-06 and landed as 6bdb26e (tests passed, memcheck clean; racecheck's
# report on the split-K: plan_thirty_first_d.sh). Written 2026-12-06 on 0bbb114 + the working tree (two changes, both from the stall samples of
# plan_thirty_first.sh's call, bench/results/logs/thirty-first-h100-ncu-sass-top.txt):
# (a) the decode attention kernels (wgmma and mma.sync) load a tile's row indices a tile ahead and
#     test them when the copies are issued (SplitRows::ref / ptr): the index test right after the
#     load held every thread ~an L2 round trip per tile (16% of the wgmma kernel's samples);
# (b) the wgmma linear's split-K push: float4 slots in register order, a warp's store 512 contiguous
#     bytes (was: 8-byte stores scattered over rows; 40% of the samples at wq_a 256 rows, split 8,
#     lg_throttle), one mapa per thread; the owners' sums in the same rank order (same bits).
# (1) tests + sanitizers; (2) op A / B against 0bbb114 (the *-before binaries); (3) model A / B.
# Build (here): the before binaries from 0bbb114 (deepinfer, cuda_ops_bench, cuda_attn_lt_bench to
#   /tmp/*-before), then: ninja -C build deepinfer cuda_ops_bench cuda_attn_lt_bench cuda_ops_test
#   cuda_attn_lt_test cuda_v4_model_test cuda_v4_synthetic_test cuda_v4_engine_test;
#   tools/device/pack_bins.sh (those and the before ones)
#   run(carry=[".device-bin.tar.xz"], timeout_s=560, command="tar xJf .device-bin.tar.xz &&
#       GIT_REV=<rev> tools/device/plan_thirty_first_c.sh")
set -uo pipefail
source "$(dirname "$0")/loops.sh"
plan_start

echo "== tests"
run_test_specs 60:cuda_ops_test:CudaOps.Fp8* 90:cuda_attn_lt_test:CudaAttention.*-CudaAttention.PrefillSpeed \
  60:cuda_v4_model_test 60:cuda_v4_synthetic_test 100:cuda_v4_engine_test
run_sanitized "$BIN" 90 "memcheck:cuda_ops_test:CudaOps.Fp8WgmmaLinearMatchesCpu" \
  "racecheck:cuda_ops_test:CudaOps.Fp8WgmmaLinearMatchesCpu" \
  "memcheck:cuda_attn_lt_test:CudaAttention.DecodeMatchesReference:CudaAttention.HeadsPerBlockBitwise"
echo "tests rc=${TEST_RC:-?} san rc=${SAN_RC:-?} ($((SECONDS - START)) s)"

echo "== op bench A / B"
for s in fp8paths:1024:4096:1:64 fp8paths:1024:4096:1:128 fp8paths:1024:4096:1:256 fp8paths:4096:8192:1:64 \
  fp8paths:4096:8192:1:256 fp8paths:1024:4096:8:64 fp8paths:1024:4096:8:256 fp8paths:512:4096:1:32; do
  ops_ab "$s" "fp8/(wgmma|cublaslt-timed)" 2
done
attn_ab 256:512:640 256:32:192 1:512:704 132:512:1024
echo "== model A / B"
export BENCH_CONFIGS="${BENCH_CONFIGS:-$(step_ab_configs)}"
run_benches "$BIN/deepinfer" "${BENCH_S:-220}" | grep -E "rc=|^decode |^prefill |^decode step parts" | cut -c1-150
plan_finish
echo "done ($((SECONDS - START)) s)"
