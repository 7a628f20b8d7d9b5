#!/usr/bin/env bash
# RAN on an H100 on 2026-12-06: the prefetch was slower everywhere it mattered (EP b256 device 28.45 ->
# 29.98 ms, the experts' op bench 193 -> 223 us); dropped, the patch removed
# (bench/results/h100-thirty-first-l2-prefetch-dropped.json). Written 2026-12-06 on 0bbb114 (+ the
# working tree's L2 prefetch change). The three streaming
# kernels whose copies wait on DRAM with one or two blocks an SM (the thirtieth slice's profiles:
# the FP8 expert kernels at 52-58% of DRAM with 1 eligible warp a scheduler; the wgmma attention's
# tiles ~6 us whether loads or MMAs alone, "loads only" as slow as the whole; the wgmma linear's
# time growing with its rows at fixed weight bytes) ask the TMA unit to bring their next bytes into
# L2 ahead of their cp.async copies (detail::prefetch_l2, cp.async.bulk.prefetch.L2): the FP8
# experts each chunk's two 4 KB weight tiles 8 chunks ahead, the attention tile t + 2's rows during
# tile t, the wgmma linear each K block's weight rows 8 blocks ahead. Same bits by construction
# (no value changes; the tests below compare with the CPU / references as before).
# (1) tests + memcheck; (2) op bench A / B against the build before (cuda_ops_bench-before,
# cuda_attn_lt_bench-before): the experts at the EP shape, the linears at 64 / 256 rows, the
# attention at the EP step's CSA and HCA shapes; (3) model A / B (the EP step, b1, b32, the 8k prefill; the EP step with
# --fp8-wgmma-max-rows 256).
# Build (here): the before binaries from the clean tree (deepinfer, cuda_ops_bench,
#   cuda_attn_lt_bench to /tmp/*-before), then this tree: ninja -C build deepinfer cuda_ops_bench
#   cuda_attn_lt_bench cuda_ops_test cuda_layer_ops_test cuda_attn_lt_test cuda_v4_model_test
#   cuda_v4_synthetic_test cuda_v4_engine_test; tools/device/pack_bins.sh (those, the before ones)
#   run(carry=[".device-bin.tar.xz"], timeout_s=560, command="tar xJf .device-bin.tar.xz &&
#       GIT_REV=<rev> tools/device/plan_thirty_first_b.sh")
set -uo pipefail
source "$(dirname "$0")/loops.sh"
plan_start

echo "== tests"
run_test_specs 60:cuda_ops_test:CudaOps.Fp8Wgmma* 60:cuda_layer_ops_test:CudaLayerOps.Fp8Experts*:CudaLayerOps.WideExperts* \
  90:cuda_attn_lt_test:CudaAttention.*-CudaAttention.PrefillSpeed 60:cuda_v4_model_test 60:cuda_v4_synthetic_test \
  100:cuda_v4_engine_test
run_sanitized "$BIN" 60 "memcheck:cuda_ops_test:CudaOps.Fp8WgmmaLinearMatchesCpu" \
  "memcheck:cuda_layer_ops_test:CudaLayerOps.Fp8ExpertsMatchCpuReferenceRounding" \
  "memcheck:cuda_attn_lt_test:CudaAttention.DecodeMatchesReference"
echo "tests rc=${TEST_RC:-?} san rc=${SAN_RC:-?} ($((SECONDS - START)) s)"

echo "== op bench A / B"
ops_ab moe:32:48 "moe_fp8" 4
for s in fp8paths:1024:4096:1:64 fp8paths:1024:4096:1:256 fp8paths:4096:8192:1:64 fp8paths:4096:8192:1:256 \
  fp8paths:1024:4096:8:256 fp8paths:32768:1024:1:128; do
  ops_ab "$s" "fp8/(wgmma|cublaslt-timed)" 2
done
attn_ab 256:512:640 256:32:192 1:512:704
echo "== model A / B"
# + the EP step with every FP8 linear of 65-256 rows on the wgmma kernel (the knob
# plan_thirty_first.sh measures; here with the prefetch, against ep256c4k in the same binary).
f4="--synthetic v4-flash:4" dec="--gen-len 8 --fill-state --prompt-len 4096"
export BENCH_CONFIGS="${BENCH_CONFIGS:-$(ab_pairs "ep256c4k --synthetic v4-flash-ep8 --batch 256 --gen-len 4 --fill-state --prompt-len 4096
b1 $f4 $dec --batch 1
b32 $f4 $dec --batch 32
p8k $f4 --batch 1 --prompt-len 8192 --gen-len 2")
wgep256c4k --synthetic v4-flash-ep8 --batch 256 --gen-len 4 --fill-state --prompt-len 4096 --fp8-wgmma-max-rows 256}"
run_benches "$BIN/deepinfer" "${BENCH_S:-240}" | grep -E "rc=|^decode |^prefill |^decode step parts" | cut -c1-150
plan_finish
echo "done ($((SECONDS - START)) s)"
