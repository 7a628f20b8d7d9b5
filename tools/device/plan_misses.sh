#!/usr/bin/env bash
# Where the time goes in each row of the issue's matrix that misses its target (the twenty-fourth
# slice's matrix, bench/results/matrix-h100-twentyfourth.json): `deepinfer bench --profile` (eager,
# synchronised per part; each part next to its floor from the copy / FP8 / bf16 rates measured in
# the same run) at batch 1 and 8 (ctx 4096, <= 1.3x floor missed), the 8k prefill (>= 50% of FP8
# missed) and the EP slice at batch 256, ctx 4096 (>= 25,000 tok/s missed), states filled; then one
# batch-1 decode step kernel by kernel under Nsight Compute (each kernel alone: their sum against
# the graph step says whether the kernels or the gaps between them make the 2x).
#   run(carry=[".device-bin.tar.xz"], timeout_s=400,
#       command="tar xJf .device-bin.tar.xz && GIT_REV=<rev> tools/device/plan_misses.sh")
set -uo pipefail
source "$(dirname "$0")/loops.sh"
plan_start
F4="--synthetic v4-flash:4"
export BENCH_CONFIGS="${BENCH_CONFIGS:-b1prof $F4 --batch 1 --prompt-len 4096 --gen-len 8 --fill-state --profile
b8prof $F4 --batch 8 --prompt-len 4096 --gen-len 8 --fill-state --profile
p8kprof $F4 --batch 1 --prompt-len 8192 --gen-len 2 --profile
ep256c4kprof --synthetic v4-flash-ep8 --batch 256 --prompt-len 4096 --gen-len 3 --fill-state --profile}"
run_benches "$BIN/deepinfer" "${BENCH_S:-200}"
ncu_step_table $((${NCU_S:-380} - (SECONDS - START))) "$F4 --batch 1 --prompt-len 4096 --gen-len 3 --fill-state" 70
plan_finish
echo "($((SECONDS - START)) s)"
