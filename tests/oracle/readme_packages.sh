#!/usr/bin/env bash
# The README's "Core ML packages" walk-through, command by command, on the real
# binary: a package saved by coremltools (examples/coreml_mlp.py) through
# check --target ane --report, compile, run and fmt; a generated chunk out as a
# package and back.  Skipped (77) without the oracle unless CI=true.
# usage: readme_packages.sh MILC SRC ORACLE_DIR WORK
set -euo pipefail
MILC=$1 SRC=$2 ORACLE=$3 WORK=$4
source "$(dirname "$0")/oracle_env.sh"
rm -rf "$WORK"; mkdir -p "$WORK"; cd "$WORK"
export MILC_CACHE_DIR="$WORK/cache"
/usr/bin/python3 "$SRC/examples/coreml_mlp.py" mlp.mlpackage x.npy >/dev/null 2>&1
"$MILC" check --target ane --report mlp.mlpackage > report.txt
grep -q '^mlp.mlpackage: 14 ops, 14 inside the ANE profile, 0 outside$' report.txt
"$MILC" compile mlp.mlpackage -o mlp.milc > /dev/null
"$MILC" run mlp.mlpackage --input x=x.npy -o out > /dev/null
"$MILC" run mlp.milc --input x=x.npy -o out2 > /dev/null
cmp out/y.npy out2/y.npy   # the package through the cache and its compiled artifact agree
text=$("$MILC" fmt mlp.mlpackage); [[ "$text" == *layer_norm* ]]   # not `| grep -q`: under pipefail an early exit is milc's SIGPIPE
"$MILC" emit --layers 4 --format mlpackage -o chunk.mlpackage > /dev/null
"$MILC" convert chunk.mlpackage -o chunk > /dev/null
test -f chunk/model.mil && test -f chunk/weights/weight.bin
echo ok
