# lib.sh — assertions for CLI tests.  Each assertion counts; the script goes
# on after a failure so one run shows every broken expectation.
PASSED=0
FAILED=0
ok()   { PASSED=$((PASSED + 1)); }
fail() { FAILED=$((FAILED + 1)); echo "FAIL: $*" >&2; }

# run CMD... : runs it, keeping stdout in $OUT, stderr in $ERR, status in $RC.
run() {
  set +e
  "$@" > "$WORK/.out" 2> "$WORK/.err"
  RC=$?
  set -e
  OUT=$(cat "$WORK/.out")
  ERR=$(cat "$WORK/.err")
}

# expect_rc N CMD... : the command exits with N.
expect_rc() {
  local want=$1; shift
  run "$@"
  if [ "$RC" = "$want" ]; then ok; else fail "'$*' exited $RC, want $want; stderr: $ERR"; fi
}

# expect_in HAYSTACK NEEDLE : a fixed string occurs.  A shell match, not
# `printf | grep -q`: bash writes printf's output a line at a time, grep -q
# exits at the first match, and under pipefail printf's SIGPIPE on a later
# line made a match a failure (rarely: cli_test_basic, twice in a day).
expect_in() {
  if [[ "$1" == *"$2"* ]]; then ok; else fail "expected '$2' in: $1"; fi
}
expect_not_in() {
  if [[ "$1" == *"$2"* ]]; then fail "did not expect '$2' in: $1"; else ok; fi
}
expect_eq() {
  if [ "$1" = "$2" ]; then ok; else fail "got '$1', want '$2'"; fi
}
# expect_json FILE_OR_TEXT PYEXPR : a Python expression over j (the parsed JSON) is true.
expect_json() {
  if printf '%s' "$1" | "$PY" -c "import json,sys; j=json.load(sys.stdin); sys.exit(0 if ($2) else 1)"; then ok
  else fail "JSON check '$2' failed on: $1"; fi
}
