# Sourced with a libmilc.so: when it is sanitized (-DMILC_SANITIZE=ON), the
# sanitizers' runtimes must be loaded before Python, or the library refuses to
# load; Python's own allocations are not ours to leak-check.
if ldd "$1" 2>/dev/null | grep -q libasan; then
  export LD_PRELOAD="$(${CC:-cc} -print-file-name=libasan.so) $(${CC:-cc} -print-file-name=libubsan.so)"
  export ASAN_OPTIONS=${ASAN_OPTIONS:+$ASAN_OPTIONS:}detect_leaks=0
fi
