#!/usr/bin/env bash
# RAN on an H100 on 2026-12-06: tests passed; experts' op bench (tiled) 193.5 -> 188.0 us, rows
# layout 246.1 -> 218.9; EP b256 device 27.71 -> 27.74 ms (flat); (b) landed. Racecheck: 47 reports
# with (a), 67 on 0bbb114's kernel: (a) changes nothing, dropped. (The grep for 'Potential' below
# counted 0: this racecheck mode words its reports "Race reported between".)
# Written 2026-12-06 on 6bdb26e + the working tree: (a) thirty-first-wgmma-push-barrier.patch (a
# __syncthreads between the wgmma linear's cp.async wait and the split-K cluster barrier: the
# pattern racecheck tracks copies through; plan_thirty_first_d.sh's question) and (b) the FP8 expert
# kernel's MMA at width 48 for groups of 33-48 rows (was 64: the EP step's ~48-row groups paid a
# quarter of their MMA and promotion for nothing; m64n48k32, same per-column arithmetic).
# One call, short (the session's last device seconds): tests; op A / B (cuda_ops_bench-before:
# 6bdb26e); the EP step A / B (deepinfer-head: 6bdb26e); racecheck on the new wgmma linear, then on
# 0bbb114's (cuda_ops_test-0bbb114) while the box lasts.
# Build (here): 6bdb26e's deepinfer and cuda_ops_bench to /tmp/deepinfer-head, /tmp/cuda_ops_bench-before;
#   0bbb114's fp8_wgmma.cu in cuda_ops_test to /tmp/cuda_ops_test-0bbb114; the tree: ninja -C build
#   deepinfer cuda_ops_bench cuda_ops_test cuda_layer_ops_test; tools/device/pack_bins.sh (those)
#   run(carry=[".device-bin.tar.xz"], timeout_s=230, command="tar xJf .device-bin.tar.xz &&
#       tools/device/plan_thirty_first_e.sh")
set -uo pipefail
source "$(dirname "$0")/loops.sh"
plan_start
run_test_specs 40:cuda_ops_test:CudaOps.Fp8* 60:cuda_layer_ops_test:CudaLayerOps.Fp8Experts*:CudaLayerOps.WideExperts*
echo "tests rc=${TEST_RC:-?} ($((SECONDS - START)) s)"
ops_ab moe:32:48 "moe_fp8" 4
for s in fp8paths:1024:4096:1:256 fp8paths:1024:4096:8:256; do ops_ab "$s" "fp8/wgmma" 1; done
ep="--synthetic v4-flash-ep8 --batch 256 --gen-len 4 --fill-state --prompt-len 4096"
export BENCH_CONFIGS="ep256c4k $ep
head-ep256c4k $ep"
run_benches "$BIN/deepinfer" 70 | grep -E "rc=|^decode |^decode step parts" | cut -c1-150
f=CudaOps.Fp8WgmmaLinearMatchesCpu
run_sanitized "$BIN" $((215 - SECONDS + START)) "racecheck:cuda_ops_test:$f" "racecheck:cuda_ops_test-0bbb114:$f"
for t in cuda_ops_test cuda_ops_test-0bbb114; do
  echo "$t: $(grep -c 'Potential' "$OUT/san-racecheck-$t.txt" 2>/dev/null) hazard reports"
done
echo "done ($((SECONDS - START)) s)"
