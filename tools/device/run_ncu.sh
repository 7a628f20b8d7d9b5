#!/usr/bin/env bash
# One device call of Nsight Compute profiling with the carried binaries (.device-bin, see
# pack_bins.sh), output under $OUT:
#   1. KERNEL_ARGS="REGEX OPS_ARGS": ncu's SOL / occupancy / warp-state / memory sections for the
#      first 2 kernels matching REGEX in `cuda_ops_bench OPS_ARGS` (ncu-kernels.txt);
#   2. TIME_BENCH="ARGS": device time by kernel of `deepinfer bench --device cuda ARGS`, every
#      kernel serialised and timed alone (tools/device/ncu_table.py; ncu-times.txt); TIME_SKIP and
#      TIME_COUNT pick a window of launches (e.g. one decode step after the prefill); with
#      TIME_RANGE=1 only the timed decode steps are recorded (the bench marks them with
#      cudaProfilerStart/Stop; ncu --profile-from-start off), so a large batch's prefill is not
#      profiled kernel by kernel (tools/device/ncu_step.py then picks one step); with --gen-len 0
#      the bench marks its timed prefill instead (not the warm-up pass).
set -uo pipefail
OUT=${OUT:-/tmp/out}
mkdir -p "$OUT"
CUDA_LIB=$(dirname "$(dirname "$(command -v nvcc)")")
export LD_LIBRARY_PATH="$PWD/.device-bin/lib:$CUDA_LIB/lib64:$CUDA_LIB/targets/x86_64-linux/lib:${LD_LIBRARY_PATH:-}"
NCU=$(command -v ncu || ls /usr/local/cuda*/bin/ncu /opt/nvidia/nsight-compute/*/ncu 2>/dev/null | head -1)
[ -n "$NCU" ] || { echo "no ncu"; exit 1; }
"$NCU" --version | tail -1
if [ -n "${KERNEL_ARGS:-}" ]; then
  read -r regex ops_args <<< "$KERNEL_ARGS"
  echo "== ncu sections: $regex in cuda_ops_bench $ops_args ($(date +%T))"
  # shellcheck disable=SC2086
  timeout "${KERNEL_S:-150}" "$NCU" -k "regex:$regex" -c 2 --section SpeedOfLight --section Occupancy \
    --section WarpStateStats --section MemoryWorkloadAnalysis --section ComputeWorkloadAnalysis \
    --section LaunchStats --section SchedulerStats \
    .device-bin/bin/cuda_ops_bench /tmp/ops.json x $ops_args > "$OUT/ncu-kernels.txt" 2>&1
  echo "rc=$?"
  grep -vE "^==PROF==|^ *-+ *$|^ *$" "$OUT/ncu-kernels.txt" | grep -E "mxfp4|Throughput|Duration|Occupancy|Registers|Stall|Warp Cycles|Eligible|Issued|Active Warps|L1|L2|DRAM|Bank|Pipe|Shared|Block Limit|Waves|OPT|WRN" | cut -c1-160 | head -120
fi
if [ -n "${TIME_BENCH:-}" ]; then
  echo "== ncu kernel times: deepinfer bench $TIME_BENCH ($(date +%T))"
  # shellcheck disable=SC2086
  timeout "${TIME_S:-200}" "$NCU" --metrics gpu__time_duration.sum --cache-control none --clock-control none \
    $([ "${TIME_RANGE:-0}" = 1 ] && echo --profile-from-start off) \
    --launch-skip "${TIME_SKIP:-0}" --launch-count "${TIME_COUNT:-100000}" --csv --log-file "$OUT/ncu-times.csv" \
    .device-bin/bin/deepinfer bench --device cuda $TIME_BENCH > "$OUT/ncu-bench.txt" 2>&1
  echo "rc=$?"; grep -E "^decode |^prefill " "$OUT/ncu-bench.txt"
  python3 tools/device/ncu_table.py "$OUT/ncu-times.csv" 40 | tee "$OUT/ncu-times.txt"
  gzip -f "$OUT/ncu-times.csv"
fi
