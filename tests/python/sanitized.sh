# Sourced with a libmilc.so: when it is sanitized (-DMILC_SANITIZE=ON), the
# sanitizers' runtimes must be loaded before Python, or the library refuses to
# load; Python's own allocations are not ours to leak-check.
# The library list is captured whole, not piped into `grep -q`: grep exits at
# the first match, and a caller running under pipefail (tests/cli/run.sh) then
# saw ldd's SIGPIPE as "not sanitized" whenever ldd wrote after that match.
milc_deps=$(ldd "$1" 2>/dev/null || true)
if [[ "$milc_deps" == *libasan* ]]; then
  export LD_PRELOAD="$(${CC:-cc} -print-file-name=libasan.so) $(${CC:-cc} -print-file-name=libubsan.so)"
  export ASAN_OPTIONS=${ASAN_OPTIONS:+$ASAN_OPTIONS:}detect_leaks=0
fi
unset milc_deps
