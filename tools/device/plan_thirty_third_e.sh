#!/usr/bin/env bash
# The thirty-third slice's fifth call (2026-12-06, on 2aaf4f6): moe_rows_fp8's slot rows 8 at a time
# alone (plan_thirty_third_d.sh ran it with the prefill bf16 rows, whose build was ~1% slower at
# b8 and the EP step). Tests: the experts' (MoeRowsFp8AnyWidth at top-k 2, 6, 11); memcheck over it;
# the route bench's moe_rows_fp8 A / B; b8 and the EP step, twice each (before: 67101fe's kernels).
set -uo pipefail
source "$(dirname "$0")/loops.sh"
plan_start
run_test_specs 60:cuda_experts_test
run_sanitized "$BIN" 40 "memcheck:cuda_experts_test:CudaExperts.MoeRowsFp8AnyWidth"
echo "tests rc=${TEST_RC:-?} san rc=${SAN_RC:-?} ($((SECONDS - START)) s)"
for r in route:8:256 route:256:32; do ops_ab "$r" "moe_rows_fp8" 1; done
ep="--synthetic v4-flash-ep8 --batch 256 --gen-len 4 --fill-state --prompt-len 4096"
f4="--synthetic v4-flash:4 --gen-len 8 --fill-state --prompt-len 4096"
export BENCH_CONFIGS="${BENCH_CONFIGS:-before-b8 $f4 --batch 8
b8 $f4 --batch 8
b8b $f4 --batch 8
before-b8b $f4 --batch 8
before-ep256c4k $ep
ep256c4k $ep
ep256c4k2 $ep
before-ep256c4k2 $ep}"
run_benches "$BIN/deepinfer" "${BENCH_S:-150}" | grep -E "rc=|^decode |^decode step parts" | cut -c1-150
plan_finish
echo "done ($((SECONDS - START)) s)"
