#!/usr/bin/env bash
# The thirty-sixth slice's plan (2026-12-07, session from 04:36): the landed tree after the
# thirty-fifth slice's patch was measured and dropped.
# - tests: the set_tuning fix (V4Synthetic.DecodeShapeIsCapturedTheSecondTime now changes the
#   tuning between steps), TuningChangesNoBits, the model's GPU-vs-CPU tests; the K=V row's fused
#   tail (kv_norm_rope_bf16: kv_norm, RoPE, bf16 and the rings in one kernel where four ran) against
#   the four kernels, bit for bit (CudaModelOps.KvNormRopeMatchesFourKernels);
# - the model: v4-flash-4 decode ctx 4k at batch 1 and 8, the fused tail against the build before
#   it (deepinfer-before: the set_tuning fix only), twice at batch 1;
# (Its first form also asked for an Nsight Systems trace of the batch-1 graph, node by node: the
# device machine has no nsys, only ncu, so that part is gone.)
# Build (here): ninja -C build; tools/device/pack_bins.sh build/tools/deepinfer/deepinfer
#   build/tests/cuda/{cuda_v4_synthetic_test,cuda_v4_model_test,cuda_model_ops_test} DIR/deepinfer-before
#   run(carry=[".device-bin.tar.xz"], timeout_s=300, command="tar xJf .device-bin.tar.xz &&
#       tools/device/plan_thirty_sixth.sh")  (~60 s on an H100)
set -uo pipefail
source "$(dirname "$0")/loops.sh"
plan_start
run_test_specs 30:cuda_model_ops_test:*NormRope* \
  90:cuda_v4_synthetic_test:*DecodeShapeIsCapturedTheSecondTime*:*TuningChangesNoBits* 80:cuda_v4_model_test
echo "tests rc=${TEST_RC:-?} ($((SECONDS - START)) s)"
grep -hE "^wide vs|Failure|kept the graphs|dropped the graphs|mismatch|rings differ" "$OUT"/test-*.txt | head -8
f4="--synthetic v4-flash:4 --gen-len 8 --fill-state --prompt-len 4096"
export BENCH_CONFIGS="before-b1 $f4 --batch 1
b1 $f4 --batch 1
before-b8 $f4 --batch 8
b8 $f4 --batch 8
before-b1b $f4 --batch 1
b1b $f4 --batch 1"
run_benches "$BIN/deepinfer" 90 | grep -E "rc=|^decode " | cut -c1-150
plan_finish
echo "done ($((SECONDS - START)) s)"
