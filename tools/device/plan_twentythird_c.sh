#!/usr/bin/env bash
# The twenty-third slice's third device call: hc_finish's Sinkhorn in blocks of its own alone
# (72f19f3 + layer_ops.cu; the second call's expert x-scale layout measured slower and was
# dropped), against 72f19f3 (deepinfer-before): the EP step both ways, hc_finish's device time in
# that step by Nsight (4 launches each), and the issue's other rows on this build.
# Build (here): T=build/tests/cuda; tools/device/pack_bins.sh build/tools/deepinfer/deepinfer /tmp/deepinfer-before \
#   $T/cuda_layer_ops_test; run(carry=[".device-bin.tar.xz"], command="tar xJf .device-bin.tar.xz && tools/device/plan_twentythird_c.sh")
set -uo pipefail
source "$(dirname "$0")/loops.sh"
plan_start
GTEST_FILTER='CudaLayerOps.Hc*' run_tests "$BIN" 30 cuda_layer_ops_test
EP="--synthetic v4-flash-ep8 --batch 256 --prompt-len 512 --gen-len 3"
F4="--synthetic v4-flash:4"
export BENCH_CONFIGS="${BENCH_CONFIGS:-ep256 $EP
before-ep256 $EP
b1 $F4 --batch 1 --prompt-len 4096 --gen-len 32
b32 $F4 --batch 32 --prompt-len 4096 --gen-len 16
p8k $F4 --batch 1 --prompt-len 8192 --gen-len 4}"
run_benches "$BIN/deepinfer" "${BENCH_S:-120}"
NCU=$(command -v ncu || ls /usr/local/cuda*/bin/ncu /opt/nvidia/nsight-compute/*/ncu 2>/dev/null | head -1)
for b in deepinfer-before deepinfer; do
  left=$((${TOTAL_S:-300} - (SECONDS - START)))
  [ -n "$NCU" ] && [ "$left" -gt 30 ] || { echo "ncu $b: skipped"; continue; }
  # shellcheck disable=SC2086
  timeout "$left" "$NCU" --profile-from-start off -k regex:hc_finish -c 4 --metrics gpu__time_duration.sum \
    "$BIN/$b" bench --device cuda $EP > "$OUT/ncu-hc-$b.txt" 2>&1
  echo "$b hc_finish (rc=$?):" $(grep -E "gpu__time_duration" "$OUT/ncu-hc-$b.txt" | awk '{print $NF}')
done
plan_finish
echo "tests rc=${TEST_RC:-?} ($((SECONDS - START)) s)"
