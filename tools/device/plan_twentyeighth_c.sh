#!/usr/bin/env bash
# The twenty-eighth slice's third call: split-KV partials in bf16 (written 2026-12-06, 883b785 +
# the change). A CSA layer of the EP step (256 sequences x 640 rows, splits of 256: 3 splits)
# wrote 100 MB of fp32 partial outputs and read them back in the combine, against 168 MB of KV it
# reads: the partials were ~half of the attention's and its combine's bytes. Now o is stored in
# bf16 (m, l stay fp32; the merge stays fp32), as the output itself is.
# With it, in deepinfer only (deepinfer-attn has the partials alone): the mHC partial kernels load
# fn (a weight) before their PDL wait, and the prefill partial (33-1,023 tokens: the EP step's 87
# launches, 16.4 us each at 256 tokens, 3x X's bytes) copies its 48 KB fn chunk by cp.async, all in
# flight at once, instead of a register loop that waited on L2 six times before the first step.
# Build (here): /tmp/deepinfer-before = 883b785's deepinfer, /tmp/cuda_attn_lt_bench-before = the
#   bench at fd18c66 (same attention as 883b785); ninja -C build deepinfer cuda_attn_lt_test
#   cuda_attn_lt_bench cuda_v4_model_test cuda_v4_synthetic_test cuda_v4_engine_test;
#   tools/device/pack_bins.sh build/tools/deepinfer/deepinfer /tmp/deepinfer-before
#   build/tests/cuda/{cuda_attn_lt_test,cuda_attn_lt_bench,cuda_v4_model_test,cuda_v4_synthetic_test,cuda_v4_engine_test}
#   /tmp/cuda_attn_lt_bench-before
#   run(carry=[".device-bin.tar.xz"], timeout_s=480, command="tar xJf .device-bin.tar.xz &&
#       GIT_REV=<rev> tools/device/plan_twentyeighth_c.sh")
set -uo pipefail
source "$(dirname "$0")/loops.sh"
plan_start

attn_checks_ab "256:512:256 128:512:256 32:512:256 256:256:256"
arc=$TEST_RC
run_test_specs 60:cuda_layer_ops_test:CudaLayerOps.Hc*:CudaLayerOps.MoeCombineHcPostBitwise
[ "$arc" = 0 ] || TEST_RC=1
echo "== mHC pre / post alone, before / after (CudaLayerOps.PrefillSpeed)"
for b in cuda_layer_ops_test-before cuda_layer_ops_test; do
  GTEST_FILTER=CudaLayerOps.PrefillSpeed timeout 60 "$BIN/$b" > "$OUT/speed-$b.txt" 2>&1
  echo "$b rc=$?"; grep -E "prefill speed T=" "$OUT/speed-$b.txt" | cut -c1-120
done

echo "== deepinfer bench, before / after"
F4="--synthetic v4-flash:4"
export BENCH_CONFIGS="${BENCH_CONFIGS:-$(ab_pairs "ep256c4k --synthetic v4-flash-ep8 --batch 256 --gen-len 4 --fill-state --prompt-len 4096
p8k $F4 --batch 1 --prompt-len 8192 --gen-len 2
b32 $F4 --batch 32 --prompt-len 4096 --gen-len 8 --fill-state
b1 $F4 --batch 1 --prompt-len 4096 --gen-len 16 --fill-state")}
attn-ep256c4k --synthetic v4-flash-ep8 --batch 256 --gen-len 4 --fill-state --prompt-len 4096"
run_benches "$BIN/deepinfer" "${BENCH_S:-200}"
plan_finish
echo "tests rc=${TEST_RC:-?} sanitizer rc=${SAN_RC:-?} ($((SECONDS - START)) s)"
