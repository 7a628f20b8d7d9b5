#!/usr/bin/env bash
# The thirty-ninth slice's fourth call (2026-12-07 ~11:40 UTC): the routed experts' e4m3 rows from
# the ffn norm's launch (HcNormPack::qe, one row per token; the w13 kernel reads each group row's
# token by moe_build_groups' row_token: no moe_rows_fp8 launch between routing and experts, below
# 1,025 tokens in one chunk), with the commit before it (3214543: split-K w13 at batch 1, the
# attention's base split by the launch, deepinfer-mid) and the session's base (e3f61f8,
# deepinfer-before).
# - tests: mHC (the experts' rows bitwise moe_rows_fp8's), experts (row_token; the token-row form
#   bitwise the slot rows), attention (decode_base_split at a fifth of the SMs), model / synthetic /
#   engine;
# - benches: batch 1 (x2), 8 and the EP step (256 tokens: the rows apply) for the three builds;
#   batch 2 and 4 against deepinfer-before; then memcheck as the box allows.
# Build (here): ninja -C build; tools/device/pack_bins.sh build/tools/deepinfer/deepinfer
#   build/tests/cuda/{cuda_layer_ops_test,cuda_experts_test,cuda_attn_lt_test,cuda_v4_model_test,
#   cuda_v4_synthetic_test,cuda_v4_engine_test} /tmp/before/deepinfer-{before,mid};
#   run(carry=[".device-bin.tar.xz"], timeout_s=360, command="tar xJf .device-bin.tar.xz && tools/device/plan_thirty_ninth_d.sh")
set -uo pipefail
source "$(dirname "$0")/loops.sh"
plan_start
run_test_specs "90:cuda_layer_ops_test:CudaLayerOps.Hc*" 120:cuda_experts_test "90:cuda_attn_lt_test:CudaAttention.*" \
  80:cuda_v4_model_test 90:cuda_v4_synthetic_test 80:cuda_v4_engine_test
echo "tests rc=${TEST_RC:-?} ($((SECONDS - START)) s)"
f4="--synthetic v4-flash:4 --gen-len 8 --fill-state --prompt-len 4096"
cfg="b1 $f4 --batch 1
b8 $f4 --batch 8
ep256 --synthetic v4-flash-ep8 --batch 256 --gen-len 4 --fill-state --prompt-len 4096
b1b $f4 --batch 1"
BENCH_CONFIGS="$(while read -r n a; do printf '%s %s\nmid-%s %s\nbefore-%s %s\n' "$n" "$a" "$n" "$a" "$n" "$a"; done <<< "$cfg")"
export BENCH_CONFIGS="$BENCH_CONFIGS
$(ab_pairs "b2 $f4 --batch 2
b4 $f4 --batch 4")"
run_benches "$BIN/deepinfer" 150 | grep -E "rc=[1-9]" | cut -c1-150
for f in "$OUT"/bench-*.txt; do
  printf '%s: %s %s\n' "$(basename "$f" .txt)" "$(grep -oE 'device [0-9.]+ ms' "$f" | head -1)" \
    "$(grep -oE '^(prefill|decode) +[0-9.]+ tokens/s' "$f" | tr -s ' ' | paste -sd' ')"
done
run_sanitized "$BIN" $((330 - (SECONDS - START))) "memcheck:cuda_experts_test:CudaExperts.Fp8ExpertsMatchCpuReferenceRounding"
echo "sanitizers rc=${SAN_RC:-?} ($((SECONDS - START)) s)"
plan_finish
echo "done ($((SECONDS - START)) s)"
