#!/usr/bin/env bash
# The thirty-fourth slice's plan (written 2026-12-06; every device call of that session was refused,
# so it runs with tools/device/pending/thirty-fourth-l2-prefetch.patch applied). What it measures:
# - the L2 prefetch of the next linears' weights in small steps (Forward::prefetch, --l2-prefetch
#   MASK, --l2-prefetch-rows N; default mask 7 = wq_a + wq_b at a layer's start, wo_a after wq_b,
#   wo_b after wo_a, at up to 64 tokens; 8 / 16 the routed experts' w2 / w1 + w3 after the routing):
#   v4-flash-4 at ctx 4k, off against on at b1 (twice each), b8, b32; the experts' sites and single
#   dense sites at b1; the EP step with the prefetch up to 256 rows;
# - the FP8 experts' weight copies marked evict_first in L2 (--experts-evict-first) at the EP step
#   (twice each) and b8;
# - the wgmma attention's one-split finish writing wo_a's FP8 input (default on; --no-attn-fp8-out:
#   the quantisation pass) at the EP step.
# The default paths change too (the expert copies always carry an L2 policy, evict_normal unless
# asked; the attention's one-split finish is a warp per 128-wide block): "before-" rows run the
# build without the patch (pack it as bin/deepinfer-before: pack_bins.sh /tmp/deepinfer-before ...).
# Tests: the prefetch ops (and memcheck over them), the synthetic model's TuningChangesNoBits
# (prefetch off / every site, evict_first, the attention's FP8 output: the same logits), the FP8
# experts (tiled with evict_first) and the attention tests (Fp8OutputIsTheOutputsQuantisation).
set -uo pipefail
source "$(dirname "$0")/loops.sh"
plan_start
run_test_specs 30:cuda_ops_test:CudaOps.L2* 90:cuda_v4_synthetic_test:*TuningChangesNoBits* \
  60:cuda_experts_test:*Fp8Experts* 90:cuda_attn_lt_test:CudaAttention.* \
  40:cuda_compress_test 120:cuda_v4_model_test:V4GpuModelTest.*
rc_fix=$TEST_RC
# the indexer fix's model test against the build without the fix's call (calibrates its tolerance)
echo "== without the indexer-query rounding (expected to fail)"
run_test_specs 40:cuda_v4_model_test-nofix:*IndexerSelectionPastTopk*
TEST_RC=$rc_fix
run_sanitized "$BIN" 60 "memcheck:cuda_ops_test:CudaOps.L2*" "memcheck:cuda_attn_lt_test:CudaAttention.Fp8Output*"
echo "tests rc=${TEST_RC:-?} san rc=${SAN_RC:-?} ($((SECONDS - START)) s)"
f4="--synthetic v4-flash:4 --gen-len 8 --fill-state --prompt-len 4096"
ep="--synthetic v4-flash-ep8 --batch 256 --gen-len 4 --fill-state --prompt-len 4096"
# most telling pairs first; the benches get what is left of PLAN_S (the call's limit less a margin)
export BENCH_CONFIGS="${BENCH_CONFIGS:-before-b1 $f4 --batch 1
off-b1 $f4 --batch 1 --l2-prefetch -1
b1 $f4 --batch 1
before-ep256c4k $ep
own-ep256c4k $ep --no-attn-fp8-out
ep256c4k $ep
ef-ep256c4k $ep --experts-evict-first
b1b $f4 --batch 1
off-b1b $f4 --batch 1 --l2-prefetch -1
off-b8 $f4 --batch 8 --l2-prefetch -1
b8 $f4 --batch 8
before-b8 $f4 --batch 8
ep256c4kb $ep
own-ep256c4kb $ep --no-attn-fp8-out
ef-ep256c4kb $ep --experts-evict-first
w2-b1 $f4 --batch 1 --l2-prefetch 15
w13-b1 $f4 --batch 1 --l2-prefetch 23
off-b32 $f4 --batch 32 --l2-prefetch -1
b32 $f4 --batch 32
pf-ep256c4k $ep --l2-prefetch-rows 256
ef-b8 $f4 --batch 8 --experts-evict-first
q-b1 $f4 --batch 1 --l2-prefetch 1
woa-b1 $f4 --batch 1 --l2-prefetch 2}"
run_benches "$BIN/deepinfer" "${BENCH_S:-$(( ${PLAN_S:-560} - (SECONDS - START) ))}" | grep -E "rc=|^decode " | cut -c1-150
plan_finish
echo "done ($((SECONDS - START)) s)"
