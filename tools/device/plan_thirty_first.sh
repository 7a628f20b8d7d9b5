#!/usr/bin/env bash
# RAN on an H100 on 2026-12-06 (part 1, with OPS_SUFFIX=-before and no model rows: the knob's model
# rows ran in plan_thirty_first_b.sh's call; logs bench/results/logs/thirty-first-h100-ncu-*).
# (Written 2026-12-06 on the thirtieth slice's last commit; no CUDA code, host only: the
# knob it measures, CudaTuning::fp8_wgmma_max_rows / `--fp8-wgmma-max-rows`, landed with it).
# Question: at 129-256 rows (the EP step's 256, decode batches 128-256), is the wgmma decode linear
# (fp8_linear_wgmma: weights as wgmma's M, the batch as its N in two halves of 128 sharing each
# weight stage, K split over a cluster where the tiles leave SMs idle; tested against the CPU at
# 1-256 rows in cuda_ops_test) faster than cuBLASLt's timed plan, which the model uses there? The
# thirtieth slice's EP profile has the cuBLASLt FP8 GEMMs of one layer at ~118 us against ~38 of
# floors (wq_a 16.5 us for a 1.6 us floor: 16 tiles of 128 x 128, a tile's whole K on one SM, no
# split of K among cuBLASLt's block-scaled algorithms). The NW = 256 kernel was never measured on
# the plain linears (the twenty-first slice's fp8mid ran 256 rows as two calls of 128).
# (1) Nsight's warp-stall reasons and SASS stall samples of the FP8 expert kernels (EP shape) and
# the wgmma linear at 256 rows (wq_a, the grouped wo_a); (2) the model with --fp8-wgmma-max-rows
# 256 (every FP8 linear of 65-256 rows on the wgmma kernel) against the default, v4-flash-4 batch
# 128 / 256, one binary. The op bench's wgmma / cuBLASLt rows at 64-256 rows and the EP step with
# the knob run in plan_thirty_first_b.sh's call (cut from here to fit one call each).
# If (2) gains: make it the default for the shapes (1) says, in forward_slots.h (kWgmmaMaxRows /
# kWgmmaLtN), with the op bench's figures as the reason.
# Build (here): ninja -C build deepinfer cuda_ops_bench cuda_attn_lt_bench; tools/device/pack_bins.sh
#   build/tools/deepinfer/deepinfer build/tests/cuda/cuda_ops_bench build/tests/cuda/cuda_attn_lt_bench
#   run(carry=[".device-bin.tar.xz"], timeout_s=400, command="tar xJf .device-bin.tar.xz &&
#       GIT_REV=<rev> tools/device/plan_thirty_first.sh")
set -uo pipefail
source "$(dirname "$0")/loops.sh"
plan_start

# ncu_stalls NAME REGEX BIN ARGS...: Nsight Compute's warp-stall reasons (per issued instruction)
# and the SASS page with its stall samples for the first 4 kernels matching REGEX in $BIN/BIN ARGS.
NCU=$(command -v ncu || ls /usr/local/cuda*/bin/ncu /opt/nvidia/nsight-compute/*/ncu 2>/dev/null | head -1)
ncu_stalls() {
  local name=$1 regex=$2 bin=$3 m='regex:smsp__average_warps_issue_stalled_.*_per_issue_active\.ratio'
  [ -n "$NCU" ] || { echo "no ncu"; return; }
  shift 3
  echo "== ncu: stall reasons, $regex in $bin $*"
  timeout 150 "$NCU" -k "regex:$regex" -c 4 --section WarpStateStats --section SourceCounters --section SpeedOfLight \
    --metrics "$m" -o "$OUT/$name" "$BIN/$bin" "$@" > "$OUT/ncu-$name.txt" 2>&1
  echo "rc=$?"
  "$NCU" -i "$OUT/$name.ncu-rep" --page raw --csv --metrics "$m,gpu__time_duration.sum,launch__grid_size" \
    > "$OUT/$name-stalls.csv" 2>&1
  python3 - "$OUT/$name-stalls.csv" <<'PY'
import csv, sys
rows = list(csv.reader(open(sys.argv[1])))
hdr = next((r for r in rows if "Kernel Name" in r), None)
if hdr:
    for r in rows[rows.index(hdr) + 2:]:
        d = dict(zip(hdr, r))
        num = lambda v: float(v.replace(",", "")) if v.replace(",", "").replace(".", "").isdigit() else None
        st = sorted(((num(v), k.split("stalled_")[1].split("_per")[0]) for k, v in d.items()
                     if "stalled_" in k and num(v) is not None), reverse=True)
        print(d.get("Kernel Name", "")[:50], "grid", d.get("launch__grid_size"), "ns", d.get("gpu__time_duration.sum"))
        print("   ", " ".join(f"{n}={v:.2f}" for v, n in st[:9]))
PY
  "$NCU" -i "$OUT/$name.ncu-rep" --page source --csv --print-source sass > "$OUT/$name-sass.csv" 2>&1
  gzip -f "$OUT/$name-sass.csv"; cp "$OUT/$name-sass.csv.gz" "$OUT/$name-stalls.csv" "$FINAL/" 2>/dev/null
}
ncu_stalls fp8x mxfp4_fp8_kernel cuda_ops_bench${OPS_SUFFIX:-} /tmp/o.json x moe:32:48
ncu_stalls wgmma256 fp8_wgmma_kernel cuda_ops_bench${OPS_SUFFIX:-} /tmp/o.json x fp8paths:1024:4096:1:256
ncu_stalls wgmma256g fp8_wgmma_kernel cuda_ops_bench${OPS_SUFFIX:-} /tmp/o.json x fp8paths:1024:4096:8:256
NO_CEILINGS=1 ATTN_CASE=256:512:640 ncu_stalls attn attn_wgmma_kernel cuda_attn_lt_bench${OPS_SUFFIX:-} /tmp/a.json x
f4="--synthetic v4-flash:4" dec="--gen-len 8 --fill-state --prompt-len 4096" wg="--fp8-wgmma-max-rows 256"
export BENCH_CONFIGS="${BENCH_CONFIGS:-b128 $f4 $dec --batch 128
wgb128 $f4 $dec --batch 128 $wg
b256 $f4 $dec --batch 256
wgb256 $f4 $dec --batch 256 $wg}"
run_benches "$BIN/deepinfer" "${BENCH_S:-200}" | grep -E "rc=|^decode |^decode step parts" | cut -c1-150
tar czf "$FINAL/runs.tgz" -C "$OUT" .
echo "done ($((SECONDS - START)) s)"
