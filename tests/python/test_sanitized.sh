# sanitized.sh under pipefail, with an ldd that names libasan first and then
# keeps writing: the preload must still be set (a `ldd | grep -q` took the
# writer's SIGPIPE for "not sanitized"), and must not be set without libasan.
set -euo pipefail
here=$(dirname "$0")
ldd() { echo "libasan.so.8 => /lib/libasan.so.8"; sleep 0.2; for i in $(seq 2000); do echo "libx$i.so => /lib/libx$i.so"; done; }
cc() { echo "/lib/${1#-print-file-name=}"; }
unset LD_PRELOAD ASAN_OPTIONS || true
source "$here/sanitized.sh" libmilc.so
[[ "${LD_PRELOAD:-}" == "/lib/libasan.so /lib/libubsan.so" ]] || { echo "FAIL: no preload after a late-writing ldd: '${LD_PRELOAD:-}'"; exit 1; }
[[ "$ASAN_OPTIONS" == detect_leaks=0 ]] || { echo "FAIL: ASAN_OPTIONS '$ASAN_OPTIONS'"; exit 1; }
unset LD_PRELOAD ASAN_OPTIONS
ldd() { echo "libm.so.6 => /lib/libm.so.6"; }
source "$here/sanitized.sh" libmilc.so
[[ -z "${LD_PRELOAD:-}" ]] || { echo "FAIL: preload set for an unsanitized library"; exit 1; }
echo "sanitized.sh: 2 checks passed"
