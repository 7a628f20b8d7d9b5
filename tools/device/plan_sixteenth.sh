#!/usr/bin/env bash
# The first device call for the sixteenth slice (FP8 experts at 128-row groups, the router as a
# GEMM, attention on wgmma: built on the development machine, never yet run on a GPU). Run on the
# GPU machine from the repository root after `tar xJf .device-bin.tar.xz` (binaries from
# tools/device/pack_bins.sh: deepinfer, cuda_ops_bench and the cuda_*_test binaries):
#   run(carry=[".device-bin.tar.xz"], timeout_s=590,
#       command="tar xJf .device-bin.tar.xz && GIT_REV=<rev> tools/device/plan_sixteenth.sh")
# Order: every CUDA test (the new kernels' tests included), compute-sanitizer on the new kernels'
# tests, the op bench's expert rows, then each model shape with the new paths against the old ones
# in the same call: the 8k prefill with each new path off in turn (--moe-fp8-max-rows 64: 128-row
# groups back on the f16 kernel; --route-gemm-rows -1: the fp32 router; all three off), the decode
# shapes with --no-attn-wgmma, and the EP slice at batch 256 with its router on the GEMM
# (--route-gemm-rows 32; by default the fp32 kernel runs to 256 rows). About 580 s in all.
set -uo pipefail
cd "$(dirname "$0")/../.."
export TESTS="cuda_attn_lt_test cuda_layer_ops_test cuda_v4_model_test cuda_ops_test cuda_model_ops_test cuda_v4_synthetic_test cuda_v4_engine_test cuda_sampling_test cuda_compress_test"
export TESTS_S=${TESTS_S:-230}
export SANITIZE="memcheck:cuda_attn_lt_test:CudaAttention.DecodeMatchesReference;memcheck:cuda_layer_ops_test:CudaLayerOps.Fp8ExpertsMatchCpuReferenceRounding;racecheck:cuda_attn_lt_test:CudaAttention.DecodeMatchesReference"
export SAN_S=${SAN_S:-60}
export OPS_BENCH="moe:256:192;moe:32:48" OPS_S=${OPS_S:-45}
export BENCH_S=${BENCH_S:-230}
F4="--synthetic v4-flash:4"
export BENCH_CONFIGS="p8k $F4 --batch 1 --prompt-len 8192 --gen-len 4
p8kfp64 $F4 --batch 1 --prompt-len 8192 --gen-len 4 --moe-fp8-max-rows 64
p8knoroute $F4 --batch 1 --prompt-len 8192 --gen-len 4 --route-gemm-rows -1
p8kold $F4 --batch 1 --prompt-len 8192 --gen-len 4 --moe-fp8-max-rows 64 --no-attn-wgmma --route-gemm-rows -1
ep256 --synthetic v4-flash-ep8 --batch 256 --prompt-len 512 --gen-len 4
ep256old --synthetic v4-flash-ep8 --batch 256 --prompt-len 512 --gen-len 4 --no-attn-wgmma
ep256rg --synthetic v4-flash-ep8 --batch 256 --prompt-len 512 --gen-len 4 --route-gemm-rows 32
b32 $F4 --batch 32 --prompt-len 4096 --gen-len 16
b32old $F4 --batch 32 --prompt-len 4096 --gen-len 16 --no-attn-wgmma
b1 $F4 --batch 1 --prompt-len 4096 --gen-len 32"
exec tools/device/run_session.sh
