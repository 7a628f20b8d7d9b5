#!/usr/bin/env bash
# The thirty-fifth slice's plan (written 2026-12-06, session from 23:20), run with
# tools/device/pending/thirty-fifth-skinny-experts.patch applied: the FP8 experts' skinny kernels
# (mxfp4_fp8_skinny.cu: groups of <= 16 rows, each warp streaming its weights through its own
# cp.async ring on mma.sync, no barrier in the K loop) against the wgmma kernel at decode batches
# 1-8. Its first run (2026-12-07 00:31, H100) was of the first version (weights in registers):
# correct, 0.61-0.77x the wgmma kernel, dropped (docs/performance.md, the thirty-fifth slice); the
# patch now holds the ring version, never run. (An earlier plan of this name, an ncu view of the
# wgmma kernel's chunk chain, never ran; this replaced it.) Ran on 2026-12-07 at 04:53 on an H100:
# both kernels slower, dropped; the patch is in git history (deleted in b20503a: `git show
# 5369e3d:tools/device/pending/thirty-fifth-skinny-experts.patch`).
# - tests: the FP8 expert kernels (skinny at every split, both MMA heights, against the CPU), the
#   rows' plain order, the synthetic model's skinny-vs-wgmma logits and TuningChangesNoBits (now
#   that set_tuning drops captured graphs, its decode rows compare for real), the model's
#   GPU-vs-CPU tests; memcheck over the skinny test;
# - op bench (cuda_ops_bench moe:E:m, CUDA-graph timed): w13 + SwiGLU + w2 for E experts of m rows,
#   the wgmma FP8 kernel on tiled weights against the skinny ones at splits 0 (auto), 1, 2, 4;
# - the model: v4-flash-4 decode ctx 4k at batch 1 (twice), 2, 4, 8, skinny (rows 8) against off
#   (--moe-fp8-skinny-rows -1), and the splits at batch 1: set the default rows from these;
# - the FP8 decode GEMV's ring loads (--fp8-gemv-ring; bitwise the same results, CudaOps.Fp8*Linear*)
#   against its register sets: per V4 shape (fp8dec) and in the model at b1 / b8; then where batch
#   8's step goes (ncu, one step kernel by kernel).
# Build (here): git apply the patch; ninja -C build; tools/device/pack_bins.sh build/tools/deepinfer/deepinfer
#   build/tests/cuda/{cuda_experts_test,cuda_v4_synthetic_test,cuda_v4_model_test,cuda_ops_bench,cuda_compress_test,cuda_ops_test}
#   run(carry=[".device-bin.tar.xz"], timeout_s=450, command="tar xJf .device-bin.tar.xz &&
#       tools/device/plan_thirty_fifth.sh")  (~70 s, then the b8 ncu table up to TOTAL_S=400)
set -uo pipefail
source "$(dirname "$0")/loops.sh"
plan_start
run_test_specs 60:cuda_experts_test:*Fp8* 60:cuda_ops_test:CudaOps.Fp8*LinearMatchesCpu
echo "expert tests rc=${TEST_RC:-?} ($((SECONDS - START)) s)"
rc_experts=$TEST_RC
grep -hE "fp8 experts \(skinny" "$OUT"/test-*.txt | head -8
for c in 6:1 24:1 48:1; do
  echo "== op bench moe:$c"
  timeout 30 "$BIN/cuda_ops_bench" "$OUT/ops-$c.json" x "moe:$c" > "$OUT/ops-$c.txt" 2>&1
  grep -E "moe_fp8_tiled|moe_fp8_skinny" "$OUT/ops-$c.txt" | sed 's/  */ /g' | cut -c1-160
done
f4="--synthetic v4-flash:4 --gen-len 8 --fill-state --prompt-len 4096"
on="--moe-fp8-skinny-rows 8"
export BENCH_CONFIGS="${BENCH_CONFIGS:-off-b1 $f4 --batch 1 --moe-fp8-skinny-rows -1
b1 $f4 --batch 1 $on
off-b8 $f4 --batch 8 --moe-fp8-skinny-rows -1
b8 $f4 --batch 8 $on
off-b1b $f4 --batch 1 --moe-fp8-skinny-rows -1
b1b $f4 --batch 1 $on
off-b2 $f4 --batch 2 --moe-fp8-skinny-rows -1
b2 $f4 --batch 2 $on
off-b4 $f4 --batch 4 --moe-fp8-skinny-rows -1
b4 $f4 --batch 4 $on
s2-b1 $f4 --batch 1 $on --moe-fp8-skinny-split 2
s4-b1 $f4 --batch 1 $on --moe-fp8-skinny-split 4
s1-b1 $f4 --batch 1 $on --moe-fp8-skinny-split 1
ring-b1 $f4 --batch 1 --moe-fp8-skinny-rows -1 --fp8-gemv-ring
ring-b8 $f4 --batch 8 --moe-fp8-skinny-rows -1 --fp8-gemv-ring
ring-b1b $f4 --batch 1 --moe-fp8-skinny-rows -1 --fp8-gemv-ring}"
run_benches "$BIN/deepinfer" 120 | grep -E "rc=|^decode " | cut -c1-150
run_test_specs 60:cuda_v4_synthetic_test:*Skinny*:*TuningChangesNoBits* 80:cuda_v4_model_test \
  20:cuda_compress_test:CudaCompress.RejectsBadArguments
[ "$rc_experts" = 0 ] || TEST_RC=1
echo "tests rc=${TEST_RC:-?} ($((SECONDS - START)) s)"
grep -hE "^skinny|^wide vs" "$OUT"/test-*.txt | head -6
run_sanitized "$BIN" 40 "memcheck:cuda_experts_test:*Fp8Skinny*"
echo "san rc=${SAN_RC:-?} ($((SECONDS - START)) s)"
# The FP8 decode GEMV alone at the V4 shapes (M 1, 8, 16): its GB/s per shape against the copy
# rate, for the b1 step's largest excess (29 GEMVs a step, ~57% of the copy rate in the
# thirty-fourth slice's table).
echo "== op bench fp8dec"
timeout 40 "$BIN/cuda_ops_bench" "$OUT/ops-fp8dec.json" x fp8dec > "$OUT/ops-fp8dec.txt" 2>&1
grep -E "^fp8_gemm/dec|^fp8_linear/dec|copy" "$OUT/ops-fp8dec.txt" | sed 's/  */ /g' | cut -c1-150 | head -24
# Where batch 8 goes, now that its routed experts sit at ~1.06x their floor (the first version's op
# bench): one decode step kernel by kernel (the wgmma experts, the default's choice at b8 unless
# this call finds otherwise).
ncu_step_table $((${TOTAL_S:-400} - (SECONDS - START))) \
  "--synthetic v4-flash:4 --batch 8 --prompt-len 4096 --gen-len 3 --fill-state --moe-fp8-skinny-rows -1" 60
plan_finish
echo "done ($((SECONDS - START)) s)"
