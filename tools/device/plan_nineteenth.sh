#!/usr/bin/env bash
# The nineteenth slice's first device call (norms that write their linears' FP8 / bf16 inputs,
# the mHC pre partial at one token per thread below 1,024 tokens, the expert groups' slot ranks
# by one warp, cuBLASLt's FP8 algorithm timed among its candidates up to 512 rows; written with no
# device as a patch, run on an H100 on 2026-12-05 and landed). Run on the GPU machine
# from the repository root after `tar xJf .device-bin.tar.xz` (tools/device/pack_bins.sh: deepinfer,
# deepinfer-before = the same flags at the slice's base commit, and the cuda_*_test binaries):
#   run(carry=[".device-bin.tar.xz"], timeout_s=590,
#       command="tar xJf .device-bin.tar.xz && GIT_REV=<rev> tools/device/plan_nineteenth.sh")
# Order: the CUDA tests that cover the changed code (the new kernels' own tests, the model and
# engine parity tests, the tuning-changes-no-bits test with --no-act-pack's path), memcheck and
# racecheck over the new kernels' tests, then each model shape three ways in the same call: this
# build, this build with --no-act-pack, and the base commit's build (before-*); last, Nsight
# Compute's full sections over the first decode attention launches of a batch-256 step at context
# 512 (the EP step's attention shape; the next lever). About 580 s (the attention op bench first).
set -uo pipefail
cd "$(dirname "$0")/../.."
export TESTS="${TESTS:-cuda_attn_lt_test cuda_ops_test cuda_layer_ops_test cuda_model_ops_test cuda_v4_synthetic_test cuda_v4_model_test cuda_v4_engine_test}"
export TESTS_S=${TESTS_S:-170}
export SANITIZE="${SANITIZE-memcheck:cuda_ops_test:CudaOps.RmsNormPackEqualsItsParts;memcheck:cuda_model_ops_test:CudaModelOps.MoeSort*;racecheck:cuda_model_ops_test:CudaModelOps.MoeSort*}"
export SAN_S=${SAN_S:-30}
export BENCH_S=${BENCH_S:-130}
F4="--synthetic v4-flash:4"
EP="--synthetic v4-flash-ep8 --batch 256 --prompt-len 512 --gen-len 4"
export BENCH_CONFIGS="ep256 $EP
before-ep256 $EP
b1 $F4 --batch 1 --prompt-len 4096 --gen-len 32
before-b1 $F4 --batch 1 --prompt-len 4096 --gen-len 32
ep256nolt $EP --no-lt-timed
p8k $F4 --batch 1 --prompt-len 8192 --gen-len 4
before-p8k $F4 --batch 1 --prompt-len 8192 --gen-len 4
ep256nopack $EP --no-act-pack
b32 $F4 --batch 32 --prompt-len 4096 --gen-len 16
before-b32 $F4 --batch 32 --prompt-len 4096 --gen-len 16
ep256rg $EP --route-gemm-rows 128"
START=$SECONDS
FINAL=${OUT:-/tmp/out}
mkdir -p "$FINAL"
CUDA_LIB=$(dirname "$(dirname "$(command -v nvcc)")")
if [ "${ATTN_BENCH:-1}" = 1 ]; then
echo "== attention op bench: mma.sync vs wgmma at batch 256 / context 512 and batch 128 / 4k (box ${ATTN_S:-40} s)"
SKIP_LT=1 LD_LIBRARY_PATH="$PWD/.device-bin/lib:$CUDA_LIB/lib64:${LD_LIBRARY_PATH:-}" timeout "${ATTN_S:-40}" \
  .device-bin/bin/cuda_attn_lt_bench "$FINAL/attn-bench.json" "${GIT_REV:-unknown}" > "$FINAL/attn-bench.txt" 2>&1
echo "rc=$?"; grep -E "decode_attention|ceiling|copy" "$FINAL/attn-bench.txt" | cut -c1-160
fi
tools/device/run_session.sh
left=$((${TOTAL_S:-570} - (SECONDS - START)))
if [ "$left" -gt 30 ]; then
  echo "== ncu: decode attention at batch 256, context 512 (box $left s)"
  NCU=$(command -v ncu || ls /usr/local/cuda*/bin/ncu /opt/nvidia/nsight-compute/*/ncu 2>/dev/null | head -1)
  timeout "$left" "$NCU" --profile-from-start off -k regex:attn_wgmma -c 4 --set full \
    .device-bin/bin/deepinfer bench --device cuda --synthetic v4-flash:4 --batch 256 --prompt-len 512 --gen-len 2 \
    > "$FINAL/ncu-attn.txt" 2>&1
  echo "ncu rc=$?"
  grep -E "attn_|Duration|Throughput|Registers|Stall|Warp Cycles|Eligible|Issued Warp|Bank|Pipe Util|Block Limit|Achieved Occ|OPT" \
    "$FINAL/ncu-attn.txt" | cut -c1-150 | head -90
  gzip -f "$FINAL/ncu-attn.txt"
fi
