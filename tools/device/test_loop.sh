# Sourced by tools/device/run_*.sh: run_tests DIR BOX_S TEST... runs each test binary DIR/TEST
# (output in $OUT/test-TEST.txt) within BOX_S seconds in all, prints a line per test with its
# OK / FAILED counts and the failure lines, and sets TEST_RC to 1 if any failed or was missing.
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
    echo "$t rc=$rc: $(grep -cE '^\[       OK' "$OUT/test-$t.txt") ok, $(grep -cE '^\[  FAILED  \].*\(' "$OUT/test-$t.txt") failed"
    grep -E "^\[  FAILED|Failure|error:|Which is|Expected|decode graphs|batch-invariant|request [0-9]+:" "$OUT/test-$t.txt" | head -12
  done
}
