# Sourced by tools/device/run_*.sh and plan_*.sh.
# plan_env: a plan's common start, in the repository root: FINAL = the call's $OUT (what comes
# back), OUT = a fresh scratch folder (the plan packs it into $FINAL/logs.tgz), the carried
# libraries first on LD_LIBRARY_PATH, BIN = the carried binaries; prints the GPU and its clocks.
plan_env() {
  FINAL=${OUT:-/tmp/out}
  mkdir -p "$FINAL"
  OUT=/tmp/plan-out
  rm -rf "$OUT" && mkdir -p "$OUT"
  local cuda_lib
  cuda_lib=$(dirname "$(dirname "$(command -v nvcc)")")
  export LD_LIBRARY_PATH="$PWD/.device-bin/lib:$cuda_lib/lib64:${LD_LIBRARY_PATH:-}"
  BIN=.device-bin/bin
  nvidia-smi --query-gpu=name,clocks.sm,clocks.mem --format=csv,noheader
}

# plan_start: a plan's start after `source "$(dirname "$0")/loops.sh"`: the repository root as the
# working directory, START = now (SECONDS), then plan_env.
plan_start() {
  cd "$(dirname "${BASH_SOURCE[0]}")/../.." || exit 1
  START=$SECONDS
  plan_env
}

# run_tests DIR BOX_S TEST... runs each test binary DIR/TEST (output in $OUT/test-TEST.txt) within
# BOX_S seconds in all, prints a line per test with its OK / FAILED / SKIPPED counts and the
# failure lines, and sets TEST_RC to 1 if any failed or was missing.
run_tests() {
  local dir=$1 box=$2 end left rc t
  shift 2
  end=$((SECONDS + box))
  TEST_RC=0
  for t in "$@"; do
    left=$((end - SECONDS))
    [ -x "$dir/$t" ] || { echo "$t: not built / not carried"; TEST_RC=1; continue; }
    [ "$left" -gt 2 ] || { echo "$t: skipped (box spent)"; continue; }
    timeout "$left" "$dir/$t" > "$OUT/test-$t.txt" 2>&1
    rc=$?
    [ $rc -eq 0 ] || TEST_RC=1
    echo "$t rc=$rc: $(grep -cE '^\[       OK' "$OUT/test-$t.txt") ok, $(grep -cE '^\[  FAILED  \].*\(' "$OUT/test-$t.txt") failed, $(grep -cE '^\[  SKIPPED' "$OUT/test-$t.txt") skipped"
    grep -E "^\[  FAILED|Failure|error:|Which is|Expected|decode graphs|batch-invariant|request [0-9]+:" "$OUT/test-$t.txt" | head -12
  done
}

# run_test_specs SPEC...: run_tests for each SPEC "BOX_S:TEST[:GTEST_FILTER]" (its own box and
# filter, default every test), TEST_RC 1 if any of them failed.
run_test_specs() {
  local spec box t filter rc=0
  for spec in "$@"; do
    IFS=: read -r box t filter <<< "$spec"
    GTEST_FILTER="${filter:-*}" run_tests "$BIN" "$box" "$t"
    [ "$TEST_RC" = 0 ] || rc=1
  done
  TEST_RC=$rc
}

# run_sanitized DIR BOX_S SPEC... runs compute-sanitizer (the CUDA toolkit's, found beside nvcc)
# over carried test binaries, within BOX_S seconds in all. SPEC is TOOL:TEST:FILTER (TOOL memcheck,
# racecheck, synccheck or initcheck; FILTER a gtest filter), e.g.
# "memcheck:cuda_attn_lt_test:CudaAttention.*". Output in $OUT/san-TOOL-TEST.txt; prints each run's
# error summary and its first reports; sets SAN_RC to 1 if any run reported errors or failed, unless
# every report names a kernel of NVIDIA's libraries (san_library_only: cuBLASLt's nvjet / xmma /
# cutlass kernels, which racecheck flags in any test that calls them) and the tests passed.
run_sanitized() {
  local dir=$1 end=$(($2 + SECONDS)) spec tool t filter left rc san
  shift 2
  SAN_RC=0
  san=$(command -v compute-sanitizer || echo "$(dirname "$(command -v nvcc)")/compute-sanitizer")
  [ -x "$san" ] || { echo "compute-sanitizer: not found"; SAN_RC=1; return; }
  for spec in "$@"; do
    IFS=: read -r tool t filter <<< "$spec"
    left=$((end - SECONDS))
    [ -x "$dir/$t" ] || { echo "$spec: not carried"; SAN_RC=1; continue; }
    [ "$left" -gt 5 ] || { echo "$spec: skipped (box spent)"; continue; }
    timeout "$left" "$san" --tool "$tool" --error-exitcode 99 --print-limit 200 "$dir/$t" --gtest_filter="${filter:-*}" \
      > "$OUT/san-$tool-$t.txt" 2>&1
    rc=$?
    if [ $rc -eq 99 ] && san_library_only "$OUT/san-$tool-$t.txt"; then
      echo "$spec: every report is in a library kernel (cuBLASLt), none in ours; counted clean"
    elif [ $rc -ne 0 ]; then
      SAN_RC=1
    fi
    echo "$spec rc=$rc: $(grep -E 'ERROR SUMMARY|RACECHECK SUMMARY' "$OUT/san-$tool-$t.txt" | tail -1)"
    grep -E "^========= (Invalid|Race|Barrier|Uninitialized|Program hit|Error)|^=========     at " "$OUT/san-$tool-$t.txt" | head -8
  done
}

# san_library_only FILE: true when compute-sanitizer's output FILE has reports, fewer than its print
# limit (200, so none went unprinted), each naming a kernel of NVIDIA's libraries on its first line
# (racecheck's form; memcheck names the kernel on the next line, so its reports never pass), and the
# gtest run in it passed.
san_library_only() {
  local reports
  reports=$(grep -E "^========= (Invalid|Race|Barrier|Uninitialized|Error)" "$1")
  [ -n "$reports" ] && [ "$(wc -l <<< "$reports")" -lt 200 ] && grep -q "^\[  PASSED  \]" "$1" &&
    ! grep -Evq "nvjet_|xmma|cutlass|cublas" <<< "$reports"
}

# run_benches DEEPINFER BOX_S: `DEEPINFER bench --device cuda ARGS --json $OUT/bench-NAME.json` for
# each line "NAME ARGS" of $BENCH_CONFIGS within BOX_S seconds in all (output $OUT/bench-NAME.txt),
# printing each run's result lines. A NAME "P-REST" runs the carried deepinfer-P instead when
# there is one (e.g. "before-f4b1": an earlier build, for a comparison in the same call).
run_benches() {
  local di=$1 end=$((SECONDS + $2)) left name args bin
  while read -r name args; do
    [ -n "$name" ] || continue
    left=$((end - SECONDS))
    [ "$left" -gt 5 ] || { echo "$name: skipped (box spent)"; continue; }
    bin=$di
    case "$name" in *-*) [ -x "$(dirname "$di")/deepinfer-${name%%-*}" ] && bin=$(dirname "$di")/deepinfer-${name%%-*} ;; esac
    # shellcheck disable=SC2086
    timeout "$left" "$bin" bench --device cuda $args --json "$OUT/bench-$name.json" > "$OUT/bench-$name.txt" 2>&1
    echo "$name rc=$?: $args"
    grep -E "^decode |^prefill |^engine |^churn |step parts|^  " "$OUT/bench-$name.txt" | sed 's/  */ /g' | cut -c1-150
  done <<< "${BENCH_CONFIGS:-}"
}

# ncu_step_table LEFT_S BENCH_ARGS [TAIL]: with more than 60 s left, every kernel of one decode step
# of `deepinfer bench --device cuda BENCH_ARGS` serialised and timed by Nsight Compute (run_ncu.sh,
# TIME_RANGE=1, 2,400 launches), the last TAIL lines (default 42) of its output printed.
ncu_step_table() {
  local left=$1 args=$2 tail_n=${3:-42}
  [ "$left" -gt 60 ] || return 0
  echo "== ncu: one decode step kernel by kernel ($args; box $left s)"
  OUT="$OUT" TIME_S=$left TIME_RANGE=1 TIME_COUNT=2400 TIME_BENCH="$args" tools/device/run_ncu.sh 2>&1 | tail -"$tail_n"
}

# attn_checks_ab CASES: the attention change's checks and A/B (plan_twentysixth*.sh): the attention tests
# (TEST_RC 1 if they or the V4 model / synthetic / engine tests fail), racecheck and memcheck over
# the attention parity test, the wgmma kernel alone before / after (cuda_attn_lt_bench-before and
# cuda_attn_lt_bench, CUDA-graph timed) at each ATTN_CASE B:N_CMP:SPLIT of CASES, and the prefill
# speed test.
attn_checks_ab() {
  local c b krc all
  echo "== tests"
  GTEST_FILTER='CudaAttention.*' run_tests "$BIN" 90 cuda_attn_lt_test
  krc=$TEST_RC
  run_tests "$BIN" "${TESTS_S:-140}" cuda_v4_model_test cuda_v4_synthetic_test cuda_v4_engine_test
  [ "$krc" = 0 ] || TEST_RC=1
  all=$TEST_RC
  run_sanitized "$BIN" 100 "racecheck:cuda_attn_lt_test:CudaAttention.PrefixIndexEqualsExplicitIndex" \
    "memcheck:cuda_attn_lt_test:CudaAttention.PrefixIndexEqualsExplicitIndex"
  echo "== the attention kernel alone, before / after (ATTN_CASE=B:N_CMP:SPLIT, CUDA-graph timed)"
  for c in $1; do
    for b in cuda_attn_lt_bench-before cuda_attn_lt_bench; do
      ATTN_CASE=$c timeout 60 "$BIN/$b" "$OUT/attn-${c//:/-}-$b.json" x > "$OUT/attn-${c//:/-}-$b.txt" 2>&1
      echo "$b $c rc=$?: $(grep -E '^decode_attention' "$OUT/attn-${c//:/-}-$b.txt" | head -1 | sed 's/  */ /g' | cut -c1-140)"
    done
  done
  GTEST_FILTER='CudaAttention.PrefillSpeed' run_tests "$BIN" 40 cuda_attn_lt_test
  grep -E "prefill speed" "$OUT/test-cuda_attn_lt_test.txt" | cut -c1-170
  [ "$TEST_RC" = 0 ] && TEST_RC=$all
}

# ab_pairs "NAME ARGS" lines: each line, then the same with NAME before-NAME (run_benches runs a
# before- config with the carried build before the change, deepinfer-before).
ab_pairs() { ab_sets before "$1"; }

# ab_sets "P1 P2 ..." "NAME ARGS" lines: each line, then the same with NAME P1-NAME, P2-NAME, ...
# (run_benches runs a P- config with the carried build deepinfer-P: an A/B/C of stacked changes).
ab_sets() {
  local name args p
  while read -r name args; do
    [ -n "$name" ] || continue
    printf '%s %s\n' "$name" "$args"
    for p in $1; do printf '%s-%s %s\n' "$p" "$name" "$args"; done
  done <<< "$2"
}

# decode_ab_configs "NAME..." ["P1 P2 ..."]: decode rows by name, each followed by its twins
# (ab_sets of the builds named, default "before": ab_pairs): bN is v4-flash-4 at batch N with
# ctx-4k states filled, epN the EP slice at batch N (ctx 4k, filled); a trailing letter names a
# repeat (b1b, b1c), as BENCH_CONFIGS lines.
decode_ab_configs() {
  local f4="--synthetic v4-flash:4 --gen-len 8 --fill-state --prompt-len 4096" n b lines=""
  for n in $1; do
    b=${n#ep}; b=${b#b}; b=${b%%[a-z]*}
    case "$n" in
      ep*) lines+="$n --synthetic v4-flash-ep8 --batch $b --gen-len 4 --fill-state --prompt-len 4096"$'\n' ;;
      b*) lines+="$n $f4 --batch $b"$'\n' ;;
    esac
  done
  ab_sets "${2:-before}" "$lines"
}

# kernel_timeline_of NAME BOX_S BENCH_ARGS...: one `deepinfer bench --device cuda BENCH_ARGS` with
# CUPTI's kernel records (libkernel_trace.so preloaded; $OUT/trace-NAME.csv, gzipped after) and its
# last decode step's timeline (tools/device/kernel_timeline.py) into $FINAL/timeline-NAME.txt;
# prints the timeline's first line.
kernel_timeline_of() {
  local name=$1 box=$2
  shift 2
  KERNEL_TRACE_OUT="$OUT/trace-$name.csv" LD_PRELOAD="$PWD/$BIN/libkernel_trace.so" timeout "$box" "$BIN/deepinfer" \
    bench --device cuda "$@" > "$OUT/trace-bench-$name.txt" 2>&1
  python3 tools/device/kernel_timeline.py "$OUT/trace-$name.csv" > "$FINAL/timeline-$name.txt" 2>&1
  head -1 "$FINAL/timeline-$name.txt"
  gzip -f "$OUT/trace-$name.csv"
}

# bench_device_ms: a line per bench run of this plan ($OUT/bench-NAME.txt): its name, the decode
# step's device time and, for a prefill run, its prefill line.
bench_device_ms() {
  local f
  for f in "$OUT"/bench-*.txt; do
    printf '%s: %s %s\n' "$(basename "$f" .txt)" "$(grep -oE 'device [0-9.]+ ms' "$f" | head -1)" \
      "$(grep -E '^prefill +[0-9]' "$f" | head -1 | cut -c1-90)"
  done
}

# step_ab_configs: the model A / B rows of a change that may move any shape (ab_pairs of v4-flash-4
# decode at batch 1, 8, 32 with ctx-4k states filled, the EP step at batch 256 ctx 4k, the 8k
# prefill), as BENCH_CONFIGS lines.
step_ab_configs() {
  local f4="--synthetic v4-flash:4" dec="--gen-len 8 --fill-state --prompt-len 4096"
  ab_pairs "b1 $f4 $dec --batch 1
b8 $f4 $dec --batch 8
b32 $f4 $dec --batch 32
ep256c4k --synthetic v4-flash-ep8 --batch 256 --gen-len 4 --fill-state --prompt-len 4096
p8k $f4 --batch 1 --prompt-len 8192 --gen-len 2"
}

# ncu_prefill_table BOX_S BENCH_ARGS: with more than 60 s, every kernel of one prefill of
# `deepinfer bench BENCH_ARGS --gen-len 0` (the timed prefill is then the profiler's span) timed
# alone by Nsight Compute, in $OUT/p8k.
ncu_prefill_table() {
  [ "$1" -gt 60 ] || return 0
  mkdir -p "$OUT/p8k"
  echo "== ncu: the prefill kernel by kernel ($2; box $1 s)"
  OUT="$OUT/p8k" TIME_S=$1 TIME_RANGE=1 TIME_BENCH="$2 --gen-len 0" tools/device/run_ncu.sh 2>&1 | tail -42
}

# ncu_step_by_name BOX_S BENCH_ARGS: with more than 60 s, one decode step of `deepinfer bench
# BENCH_ARGS` (its timed steps recorded, states best filled) summed by kernel name
# (tools/device/ncu_step.py), in $OUT/step.
ncu_step_by_name() {
  [ "$1" -gt 60 ] || return 0
  mkdir -p "$OUT/step"
  echo "== ncu: one decode step kernel by kernel ($2; box $1 s)"
  OUT="$OUT/step" TIME_S=$1 TIME_RANGE=1 TIME_COUNT=20000 TIME_BENCH="$2" tools/device/run_ncu.sh > "$OUT/step/run.txt" 2>&1
  grep -E "^rc=|^decode " "$OUT/step/run.txt"
  [ -f "$OUT/step/ncu-times.csv.gz" ] &&
    python3 tools/device/ncu_step.py <(zcat "$OUT/step/ncu-times.csv.gz") 2>&1 | tee "$OUT/step/step.txt" | head -40
}

# ops_ab ARGS GREP [LINES]: `cuda_ops_bench OUT x ARGS` with the carried build before
# (cuda_ops_bench-before) and this one, each within 60 s, printing the first LINES (default 4)
# result lines that match GREP; output in $OUT/ops-NAME-BIN.{json,txt} (NAME: ARGS, colons as dashes).
ops_ab() {
  local args=$1 pat=$2 lines=${3:-4} b name=${1//:/-}
  for b in cuda_ops_bench-before cuda_ops_bench; do
    timeout 60 "$BIN/$b" "$OUT/ops-$name-$b.json" x "$args" > "$OUT/ops-$name-$b.txt" 2>&1
    echo "$b $args rc=$?"; grep -E "$pat" "$OUT/ops-$name-$b.txt" | head -"$lines" | cut -c1-160
  done
}

# attn_ab CASE...: the wgmma decode attention alone (cuda_attn_lt_bench's ATTN_CASE=B:N_CMP:SPLIT,
# ceilings skipped), the build before (cuda_attn_lt_bench-before) and this one, each within 60 s;
# output in $OUT/attn-CASE-BIN.{json,txt} (CASE's colons as dashes in the .txt).
attn_ab() {
  local c b
  for c in "$@"; do
    for b in cuda_attn_lt_bench-before cuda_attn_lt_bench; do
      NO_CEILINGS=1 ATTN_CASE=$c timeout 60 "$BIN/$b" "$OUT/attn-$c-$b.json" x > "$OUT/attn-${c//:/-}-$b.txt" 2>&1
      echo "$b $c rc=$?"; grep -E "decode_attention" "$OUT/attn-${c//:/-}-$b.txt" | head -2 | cut -c1-150
    done
  done
}

# ncu_ab REGEX METRICS ARGS: Nsight Compute's METRICS (comma-separated) for the first 2 kernels
# matching REGEX in `cuda_ops_bench OUT x ARGS`, the build before and this one, each within 60 s.
ncu_ab() {
  local regex=$1 metrics=$2 args=$3 b ncu
  ncu=$(command -v ncu || ls /usr/local/cuda*/bin/ncu /opt/nvidia/nsight-compute/*/ncu 2>/dev/null | head -1)
  [ -n "$ncu" ] || { echo "no ncu"; return; }
  for b in cuda_ops_bench-before cuda_ops_bench; do
    timeout 60 "$ncu" -k "regex:$regex" -c 2 --metrics "$metrics" "$BIN/$b" /tmp/o.json x "$args" \
      > "$OUT/ncu-${args//:/-}-$b.txt" 2>&1
    echo "$b:"; grep -E "$regex|__" "$OUT/ncu-${args//:/-}-$b.txt" | grep -v "^==" | sed 's/  */ /g' | cut -c1-120
  done
}

# ab_then_matrix BOX_S BENCH_S PEER_S: the exported BENCH_CONFIGS' rows (an A/B) within BOX_S
# seconds, their logs as $FINAL/ab-logs.tgz, then the issue's matrix with its transformers peer
# (plan_matrix.sh: BENCH_S / PEER_S boxes, BENCH_CONFIGS emptied, since left exported it would make
# plan_matrix.sh re-run the A/B rows instead of the matrix).
ab_then_matrix() {
  run_benches "$BIN/deepinfer" "$1" | grep -E "rc=[1-9]" | cut -c1-150
  bench_device_ms
  tar czf "$FINAL/ab-logs.tgz" -C "$OUT" .
  echo "a/b done ($((SECONDS - START)) s)"
  case "$(nvidia-smi --query-gpu=name --format=csv,noheader | head -1)" in
    *H200*) export PEER_FILE=bench/results/peer-transformers-h200-matrix.json ;;
  esac
  BENCH_CONFIGS= OUT="$FINAL" BENCH_S=$2 PEER_S=$3 tools/device/plan_matrix.sh
}

# plan_finish: the scratch folder as $FINAL/logs.tgz, and the benches' JSON beside it where they
# fit: a call brings back at most 8 files, so past 7 in all (logs.tgz counted) they stay in the
# archive only (a run of 23 benches had lost logs.tgz itself to the limit). The limit counts every
# file under $FINAL, subfolders too: a plan that runs plan_matrix.sh after plan_finish (its OUT a
# subfolder of $FINAL) has 3 files more to fit (plan_thirty_eighth_g.sh lost its matrix.json so).
plan_finish() {
  local n_json n_final
  tar czf "$FINAL/logs.tgz" -C "$OUT" .
  n_json=$(find "$OUT" -maxdepth 1 -name 'bench-*.json' | wc -l)
  n_final=$(find "$FINAL" -type f | wc -l)
  if [ $((n_json + n_final)) -le 8 ]; then
    cp "$OUT"/bench-*.json "$FINAL/" 2>/dev/null
  else
    echo "plan_finish: $n_json bench JSON files kept in logs.tgz only (8 files come back)"
  fi
}

# ncu_stalls NAME REGEX BIN ARGS...: Nsight Compute's warp-stall reasons (per issued instruction)
# and the SASS page with its stall samples for the first 4 kernels matching REGEX in $BIN/BIN ARGS.
# Output: $OUT/ncu-NAME.txt, NAME.ncu-rep; NAME-stalls.csv and NAME-sass.csv.gz also to $FINAL.
ncu_stalls() {
  local name=$1 regex=$2 bin=$3 m='regex:smsp__average_warps_issue_stalled_.*_per_issue_active\.ratio' NCU
  NCU=$(command -v ncu || ls /usr/local/cuda*/bin/ncu /opt/nvidia/nsight-compute/*/ncu 2>/dev/null | head -1)
  [ -n "$NCU" ] || { echo "no ncu"; return; }
  shift 3
  echo "== ncu: stall reasons, $regex in $bin $*"
  timeout 150 "$NCU" -k "regex:$regex" -c 4 --section WarpStateStats --section SourceCounters --section SpeedOfLight \
    --metrics "$m" -o "$OUT/$name" "$BIN/$bin" "$@" > "$OUT/ncu-$name.txt" 2>&1
  echo "rc=$?"
  "$NCU" -i "$OUT/$name.ncu-rep" --page raw --csv --metrics "$m,gpu__time_duration.sum,launch__grid_size" \
    > "$OUT/$name-stalls.csv" 2>&1
  python3 tools/device/ncu_stalls.py "$OUT/$name-stalls.csv" 9
  "$NCU" -i "$OUT/$name.ncu-rep" --page source --csv --print-source sass > "$OUT/$name-sass.csv" 2>&1
  gzip -f "$OUT/$name-sass.csv"; cp "$OUT/$name-sass.csv.gz" "$OUT/$name-stalls.csv" "$FINAL/" 2>/dev/null
}
