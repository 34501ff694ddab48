#!/usr/bin/env bash
# run.sh TEST.sh MILC SRC — runs one CLI test script in a scratch directory
# with the helpers of lib.sh; the scratch directory is removed on success.
set -euo pipefail
test=$1
export MILC=$2 SRC=$3
export WORK=$(mktemp -d "${TMPDIR:-/tmp}/milc-cli.XXXXXX")
export MILC_CACHE_DIR=$WORK/cache
unset MILC_TEMPLATE_PATH XDG_CACHE_HOME MILC_CPU MILC_REMOTE MILC_REMOTE_KEY_FILE
export PY=/usr/bin/python3
cd "$WORK"
source "$(dirname "$0")/lib.sh"
source "$test"
echo "$PASSED passed, $FAILED failed"
[ "$FAILED" = 0 ] && rm -rf "$WORK"
[ "$FAILED" = 0 ]
