# Core ML containers: .mlpackage and model.mil folders in and out (convert,
# emit --format mlpackage, check/fmt/compile/run on packages), one cache entry
# per program whatever its container, and hostile packages refused with the
# file and field named and nothing written.
cd "$WORK"
expect_rc 0 "$MILC" emit --model tiny -o chunk
expect_rc 0 "$MILC" convert chunk -o a.mlpackage
expect_rc 0 "$MILC" convert chunk/model.mil -o b.mlpackage
# Same input, same bytes (Manifest.json identifiers come from the content).
if diff -r a.mlpackage b.mlpackage > /dev/null; then ok; else fail "two conversions differ"; fi
expect_rc 0 "$MILC" emit --model tiny --format mlpackage -o c.mlpackage
if diff -r a.mlpackage c.mlpackage > /dev/null; then ok; else fail "emit --format mlpackage differs from convert"; fi
expect_eq "$(ls c.mlpackage.emit-* 2> /dev/null | wc -l)" 0
# The package reads back to the same canonical text; its weights are the same bytes.
expect_rc 0 "$MILC" fmt a.mlpackage -o back.mil
if cmp -s back.mil chunk/model.mil; then ok; else fail "package -> text differs from the emitted model.mil"; fi
if cmp -s a.mlpackage/Data/com.apple.CoreML/weights/weight.bin chunk/weights/weight.bin; then ok; else fail "weights re-encoded"; fi
expect_rc 0 "$MILC" convert a.mlpackage -o folder
if cmp -s folder/model.mil chunk/model.mil && cmp -s folder/weights/weight.bin chunk/weights/weight.bin; then ok
else fail "package -> folder differs"; fi
# A compiled-model folder (.mlmodelc: model.mil + weights/) reads as well.
cp -r folder m.mlmodelc
expect_rc 0 "$MILC" check m.mlmodelc
expect_rc 0 "$MILC" check --target ane a.mlpackage
expect_rc 0 "$MILC" compile a.mlpackage
[ -f a.milc ] && ok || fail "compile a.mlpackage did not write a.milc"
# Replacing an existing package works; a failed write leaves the old one.
expect_rc 0 "$MILC" convert folder -o a.mlpackage
if diff -r a.mlpackage b.mlpackage > /dev/null; then ok; else fail "replaced package differs"; fi

# run: the same program as text and as a package is one cache entry.
"$PY" -c "import numpy as np; np.save('x.npy', np.random.RandomState(0).standard_normal((1, 128, 1, 32)).astype(np.float16))"
run "$MILC" --cache-dir cache -v run chunk --input x=x.npy -o out1
expect_eq "$RC" 0
expect_in "$ERR" " built"
key1=$(printf '%s\n' "$ERR" | awk '/ built$/ {print $1}')
run "$MILC" --cache-dir cache -v run a.mlpackage --input x=x.npy -o out2
expect_eq "$RC" 0
expect_in "$ERR" "$key1 cached"
run "$MILC" --cache-dir cache --json cache ls
expect_json "$OUT" "len(j) == 1"
for f in out1/*.npy; do cmp -s "$f" "out2/$(basename "$f")" && ok || fail "$f differs between text and package runs"; done
# `milc build` of the same chunk finds the same entry (same canonical text and weights).
expect_rc 0 "$MILC" emit --model tiny --mode 2 -o chunk2
run "$MILC" --cache-dir cache -v run chunk2 --input x=x.npy -o out3
expect_in "$ERR" " built"
run "$MILC" --cache-dir cache --json build --model tiny --mode 2
expect_json "$OUT" "j['builds'][0]['outcome'] == 'full_hit'"

# ---- hostile packages: exit 1, the file and field named, nothing written ----
bad() { # bad NAME NEEDLE: check and convert refuse bad/NAME.mlpackage
  run "$MILC" check "bad/$1.mlpackage"
  expect_eq "$RC" 1
  expect_in "$ERR" "$2"
  run "$MILC" convert "bad/$1.mlpackage" -o "out-$1.mlpackage"
  expect_eq "$RC" 1
  [ ! -e "out-$1.mlpackage" ] && ok || fail "convert of bad $1 wrote something"
  expect_eq "$(ls -d out-"$1".mlpackage.tmp-* 2> /dev/null | wc -l)" 0
}
mkpkg() { rm -rf "bad/$1.mlpackage"; mkdir -p bad; cp -r b.mlpackage "bad/$1.mlpackage"; }
spec=Data/com.apple.CoreML/model.mlmodel
mkpkg json; printf '{"rootModelIdentifier": ' > bad/json.mlpackage/Manifest.json
bad json "Manifest.json:1:"
mkpkg big; head -c 1100000 /dev/zero | tr '\0' ' ' > bad/big.mlpackage/Manifest.json
bad big "Manifest.json: error: file too large"
mkpkg noroot; "$PY" - bad/noroot.mlpackage/Manifest.json << 'PYEOF'
import json, sys; m = json.load(open(sys.argv[1])); m["rootModelIdentifier"] = "nope"; json.dump(m, open(sys.argv[1], "w"))
PYEOF
bad noroot 'itemInfoEntries["nope"]: missing'
for p in ../../../etc/passwd /etc/passwd com.apple.CoreML/../../Manifest.json; do
  mkpkg dotdot; "$PY" - bad/dotdot.mlpackage/Manifest.json "$p" << 'PYEOF'
import json, sys; m = json.load(open(sys.argv[1]))
m["itemInfoEntries"][m["rootModelIdentifier"]]["path"] = sys.argv[2]; json.dump(m, open(sys.argv[1], "w"))
PYEOF
  bad dotdot "leaves the package"
done
mkpkg link; mkdir -p outside; cp b.mlpackage/$spec outside/; ln -sf "$WORK/outside/model.mlmodel" bad/link.mlpackage/$spec
bad link "leaves the package"
mkpkg nospec; rm bad/nospec.mlpackage/$spec
bad nospec "root model item path: 'com.apple.CoreML/model.mlmodel' is missing"
mkpkg nodata; rm -r bad/nodata.mlpackage/Data
bad nodata "root model item path: 'bad/nodata.mlpackage/Data' is missing"
mkpkg garbage; head -c 300 /dev/urandom > bad/garbage.mlpackage/$spec
bad garbage "model.mlmodel: "
# Patches of the same length keep the protobuf valid.
patch_spec() { "$PY" - "bad/$1.mlpackage/$spec" "$2" "$3" << 'PYEOF'
import sys; p, a, b = sys.argv[1:]; d = open(p, "rb").read(); assert a.encode() in d and len(a) == len(b)
open(p, "wb").write(d.replace(a.encode(), b.encode()))
PYEOF
}
mkpkg blobpath; patch_spec blobpath "@model_path/weights/weight.bin" "@model_path/../../../etc/passw"
bad blobpath 'blobFileValue.fileName'
mkpkg bloblink; ln -sf "$WORK/chunk/weights/weight.bin" bad/bloblink.mlpackage/Data/com.apple.CoreML/weights/weight.bin
bad bloblink 'blobFileValue.fileName'
mkpkg short; truncate -s 200 bad/short.mlpackage/Data/com.apple.CoreML/weights/weight.bin
bad short "is past the end of @model_path/weights/weight.bin"
mkpkg unknown; patch_spec unknown "softmax" "softmix"
bad unknown "unknown op 'softmix'"
expect_in "$ERR" 'model.mlmodel: error: functions["main"].operations[51] (softmix).type: unknown op'

# Several functions: one FunctionDescription each, and the same text back.
expect_rc 0 "$MILC" convert "$SRC/tests/mil/golden/multi_func.mil" -o mf.mlpackage
run "$MILC" fmt mf.mlpackage
if [ "$OUT" = "$(cat "$SRC/tests/mil/golden/multi_func.expected")" ]; then ok; else fail "multi-function package reads back differently"; fi
