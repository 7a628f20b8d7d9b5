#!/usr/bin/env bash
# Superseded: its questions ran in plan_thirty_first_e.sh's call (2026-12-06, H100): racecheck
# reports the same class of hazard with the patch (47) and on 0bbb114's kernel (67); the patch was
# dropped and removed. (Written 2026-12-06 on 6bdb26e.) Racecheck's report on the wgmma linear's split-K
# (plan_thirty_first_c.sh's call, the build 6bdb26e landed): "Potential WAW hazard (invalid
# memcpy_async synchronization)" between a thread's cp.async into its ring (waited by
# cp.async.wait_group 0) and another block's later push into the same bytes after the cluster
# barrier (barrier.cluster.arrive.release / wait.acquire). The memory model orders them (the copy is
# complete at wait_group; release / acquire at cluster scope); the same copies, wait and barrier
# precede the pushes in 0bbb114's kernel, never racechecked before. Question: (1) does
# thirty-first-wgmma-push-barrier.patch (a __syncthreads between the wait and the cluster barrier,
# the CTA-level pattern racecheck tracks copies through) make racecheck clean, and at what cost (op
# bench, wgmma rows); (2) does 0bbb114's kernel draw the same report (pre-existing)?
# Build (here): ninja -C build cuda_ops_test cuda_ops_bench; cp them to /tmp/*-before; git apply
#   tools/device/pending/thirty-first-wgmma-push-barrier.patch; ninja -C build cuda_ops_test
#   cuda_ops_bench; (optional) 0bbb114's cuda_ops_test as /tmp/cuda_ops_test-0bbb114 (a worktree);
#   tools/device/pack_bins.sh build/tools/deepinfer/deepinfer build/tests/cuda/cuda_ops_test
#   build/tests/cuda/cuda_ops_bench /tmp/cuda_ops_test-before /tmp/cuda_ops_bench-before [/tmp/cuda_ops_test-0bbb114]
#   run(carry=[".device-bin.tar.xz"], timeout_s=300, command="tar xJf .device-bin.tar.xz &&
#       tools/device/plan_thirty_first_d.sh")
# If (1) is clean and the op bench holds: commit the patch (remove it here).
set -uo pipefail
source "$(dirname "$0")/loops.sh"
plan_start
run_test_specs 60:cuda_ops_test:CudaOps.Fp8*
f=CudaOps.Fp8WgmmaLinearMatchesCpu
run_sanitized "$BIN" 200 "racecheck:cuda_ops_test:$f" "racecheck:cuda_ops_test-0bbb114:$f" "racecheck:cuda_ops_test-before:$f"
for t in cuda_ops_test cuda_ops_test-0bbb114 cuda_ops_test-before; do
  echo "$t: $(grep -c 'Potential' "$OUT/san-racecheck-$t.txt" 2>/dev/null) hazard reports"; grep -m2 "Potential" "$OUT/san-racecheck-$t.txt"
done
for s in fp8paths:1024:4096:1:64 fp8paths:1024:4096:1:256 fp8paths:1024:4096:8:256 fp8paths:4096:8192:1:64; do
  ops_ab "$s" "fp8/wgmma" 1
done
plan_finish
echo "done ($((SECONDS - START)) s)"
