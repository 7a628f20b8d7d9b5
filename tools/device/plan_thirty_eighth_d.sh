#!/usr/bin/env bash
# The thirty-eighth slice's fourth plan (2026-12-07, written and run the same session; ran on an H100
# at ~09:27 UTC: tests passed; device ms b1 1.126 -> 1.082, b2 1.247 -> 1.216, b4 1.467 -> 1.428,
# b8 1.845 -> 1.793, b16 2.438 -> 2.440; landed): FP8 linears
# of 1-15 rows on the wgmma decode kernel by default (kWgmmaMinRows 16 -> 1; plan_thirty_eighth_c.sh
# ran --fp8-wgmma-rows 1: batch 1 1.135 -> 1.088 ms of device time, batch 8 1.855 -> 1.794).
# - tests: the wgmma linear against the CPU (M = 1, 16, 33, 64, ...), the model / synthetic / engine
#   tests (their default-mode rows now take it below 16 rows);
# - A/B in one binary: batch 1, 2, 4, 8, 16 against --fp8-wgmma-rows 16 (the old default);
# - the op bench, GEMV / wgmma / cuBLASLt alone at 1 and 8 rows for every decode FP8 shape.
# Build (here): pack deepinfer, cuda_ops_bench and the four test binaries; run(carry=[".device-bin.tar.xz"],
#   timeout_s=360, command="tar xJf .device-bin.tar.xz && tools/device/plan_thirty_eighth_d.sh")
set -uo pipefail
source "$(dirname "$0")/loops.sh"
plan_start
run_test_specs "40:cuda_ops_test:CudaOps.Fp8Wgmma*" 80:cuda_v4_model_test 90:cuda_v4_synthetic_test \
  80:cuda_v4_engine_test
echo "tests rc=${TEST_RC:-?} ($((SECONDS - START)) s)"
f4="--synthetic v4-flash:4 --gen-len 8 --fill-state --prompt-len 4096"
cfg="b1 $f4 --batch 1
b2 $f4 --batch 2
b4 $f4 --batch 4
b8 $f4 --batch 8
b16 $f4 --batch 16
b1b $f4 --batch 1"
export BENCH_CONFIGS="$(while read -r n a; do printf '%s %s\nold16-%s %s --fp8-wgmma-rows 16\n' "$n" "$a" "$n" "$a"; done <<< "$cfg")"
run_benches "$BIN/deepinfer" 120 | grep -E "rc=|^decode " | cut -c1-150
bench_device_ms
echo "== op bench: each decode FP8 shape alone at 1 and 8 rows (us; weights rotated past L2)"
for s in 1024:4096:1 512:4096:1 32768:1024:1 1024:4096:8 4096:8192:1 4096:4096:1 4096:2048:1; do
  for m in 1 8; do
    timeout 40 "$BIN/cuda_ops_bench" "$OUT/ops-$s-$m.json" x "fp8paths:$s:$m" > "$OUT/ops-${s//:/-}-$m.txt" 2>&1
    echo "fp8paths:$s:$m rc=$?"; grep -E "fp8/" "$OUT/ops-${s//:/-}-$m.txt" | sed 's/  */ /g' | cut -c1-150
  done
done
plan_finish
echo "done ($((SECONDS - START)) s)"
