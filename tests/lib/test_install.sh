#!/bin/bash
# libmilc as an app sees it: `cmake --install` into a fresh prefix, build
# chain.c with `pkg-config --cflags --libs milc` alone, run the chain in one
# process, and compare its last output with the CLI's `milc run` of the same
# chunks one by one.
#   test_install.sh BUILD_DIR MILC SOURCE_DIR PYTHON
set -euo pipefail
build=$1 milc=$2 src=$3 python=$4
work=$(mktemp -d "${TMPDIR:-/tmp}/milc-install-XXXXXX")
trap 'rm -rf "$work"' EXIT
cmake --install "$build" --prefix "$work/prefix" >/dev/null
export PKG_CONFIG_PATH="$work/prefix/lib/pkgconfig"
test -f "$work/prefix/include/milc.h" && test -d "$(pkg-config --variable=templatedir milc)"
# Only the public API is exported.
if nm -D --defined-only "$work/prefix/lib/libmilc.so" | awk '$2 ~ /[TDB]/ && $3 !~ /^milc_/' | grep .; then
    echo "libmilc.so exports more than milc_*" >&2; exit 1
fi
${CC:-cc} -std=c11 -Wall -Wextra -Werror ${APP_CFLAGS:-} -o "$work/chain" "$src/tests/lib/chain.c" \
    $(pkg-config --cflags --libs milc) -Wl,-rpath,"$work/prefix/lib"
"$work/chain" "$work/cache" tiny "$work/x.npy" "$work/y.npy"
# The CLI, chunk by chunk, in its own cache: tiny has two layers.
"$milc" --cache-dir "$work/cli-cache" run --model tiny --io split --layers 1 --first_layer 0 --input x="$work/x.npy" -o "$work/o0" -q
"$milc" --cache-dir "$work/cli-cache" run --model tiny --io split --layers 1 --first_layer 1 --input x="$work/o0/y.npy" -o "$work/o1" -q
"$python" - "$work/y.npy" "$work/o1/y.npy" <<'PY'
import sys, numpy as np
a, b = np.load(sys.argv[1]), np.load(sys.argv[2])
assert a.shape == b.shape and a.dtype == b.dtype, (a.shape, b.shape, a.dtype, b.dtype)
assert np.isfinite(a).all() and np.abs(a).max() > 0
d = np.abs(a.astype(np.float32) - b.astype(np.float32)).max()
assert d == 0, f"the library's chain differs from milc run's by {d}"
print(f"library chain == milc run chain ({a.shape}, max |diff| {d})")
PY
