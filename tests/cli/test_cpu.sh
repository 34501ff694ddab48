# MILC_CPU: the kernel variant is checked before anything runs (a variant the
# CPU lacks is a usage error, never a SIGILL), and it is part of the cache key.
B=("$MILC" build --model tiny --mode 2 --json)
key_of() { printf '%s' "$1" | "$PY" -c "import json,sys; print(json.load(sys.stdin)['builds'][0]['key'])"; }
outcome_of() { printf '%s' "$1" | "$PY" -c "import json,sys; print(json.load(sys.stdin)['builds'][0]['outcome'])"; }
flags=$(grep -m1 '^flags' /proc/cpuinfo 2>/dev/null || true)
has() { [[ " $flags " == *" $1 "* ]]; }

MILC_CPU=bogus expect_rc 2 "${B[@]}"
expect_in "$ERR" "MILC_CPU=bogus: unknown kernel variant 'bogus'"
if [ -e "$MILC_CACHE_DIR" ]; then fail "a refused MILC_CPU created $MILC_CACHE_DIR"; else ok; fi
case $(uname -m) in
x86_64) other=neon ;;
*) other=avx2 ;;
esac
MILC_CPU=$other expect_rc 2 "${B[@]}"
expect_in "$ERR" "kernel variant $other is not built into this milc"
if [ "$(uname -m)" = x86_64 ] && ! has avx512bw; then
  MILC_CPU=avx512 expect_rc 2 "${B[@]}"
  expect_in "$ERR" "which this CPU lacks (it runs:"
fi

# Each variant has its own entries: the scalar build misses, hits, and the
# best variant of this CPU (another key) misses again.
MILC_CPU=scalar expect_rc 0 "${B[@]}"
ks=$(key_of "$OUT"); expect_eq "$(outcome_of "$OUT")" miss
MILC_CPU=scalar expect_rc 0 "${B[@]}"
expect_eq "$(outcome_of "$OUT")" direct_hit
if [ "$(uname -m)" = x86_64 ] && has avx2 && has fma && has f16c; then
  MILC_CPU=avx2 expect_rc 0 "${B[@]}"
  ka=$(key_of "$OUT"); expect_eq "$(outcome_of "$OUT")" miss
  if [ "$ka" != "$ks" ]; then ok; else fail "scalar and avx2 share a key"; fi
  MILC_CPU=avx2 expect_rc 0 "${B[@]}"
  expect_eq "$(outcome_of "$OUT")" direct_hit
fi
