# build --packages DIR and prewarm --packages DIR: a Core ML package per
# program beside the cache, named by its artifact key, the same bytes for the
# same program, the program milc reads back from it the one it built, and
# nothing half-written left behind.  (coremltools loading them:
# tests/oracle/build_packages.sh.)
expect_rc 0 "$MILC" build --model tiny --chunk 1 --whole --packages pk --json
J=$OUT
expect_json "$J" "len(j['packages']) == 4 and all(p['written'] for p in j['packages'])"
expect_json "$J" "[p['path'] for p in j['packages']] == ['pk/%s.mlpackage' % b['key'] for b in j['builds']]"
expect_json "$J" "[p['chunk'] for p in j['packages']] == ['embed', 'layers 0-0', 'layers 1-1', 'head']"
for p in pk/*.mlpackage; do
  if [ -f "$p/Manifest.json" ] && [ -f "$p/Data/com.apple.CoreML/model.mlmodel" ]; then ok; else fail "$p incomplete"; fi
done
# Again, found through the request note: the packages are there already.
expect_rc 0 "$MILC" build --model tiny --chunk 1 --whole --packages pk
expect_in "$OUT" "(already there)"
# Into another folder from a fresh cache: byte for byte the same.
expect_rc 0 "$MILC" --cache-dir "$WORK/cache2" build --model tiny --chunk 1 --whole --packages pk2 -q
expect_rc 0 diff -r pk pk2
# The package holds the program built: its canonical text is the emitted chunk's.
K=$(printf '%s' "$J" | "$PY" -c "import json,sys; print(json.load(sys.stdin)['builds'][2]['key'])")
"$MILC" emit --model tiny --layers 1 --first-layer 1 -o em 2>/dev/null
expect_rc 0 "$MILC" fmt "pk/$K.mlpackage"
A=$OUT
expect_rc 0 "$MILC" fmt em/model.mil
expect_eq "$A" "$OUT"
expect_rc 0 "$MILC" check "pk/$K.mlpackage"
# No scratch or temporary folder is left beside the packages.
expect_eq "$(ls -A pk | grep -vc '\.mlpackage$' || true)" "0"
# Modes compile a program differently; the package is the program: the same
# bytes under each mode's key.
expect_rc 0 "$MILC" build --model tiny --layers 1 --mode 0,2 --packages pkm --json
expect_json "$OUT" "len(j['packages']) == 2 and j['packages'][0]['path'] != j['packages'][1]['path']"
P0=$(printf '%s' "$OUT" | "$PY" -c "import json,sys; print(json.load(sys.stdin)['packages'][0]['path'])")
P2=$(printf '%s' "$OUT" | "$PY" -c "import json,sys; print(json.load(sys.stdin)['packages'][1]['path'])")
expect_rc 0 diff -r "$P0" "$P2"

# prewarm: every line's programs, after the workers.
printf -- '--model tiny --chunk 1\n--model tiny-llama --layers 1 --seq 16\n' > m.txt
expect_rc 0 "$MILC" --cache-dir "$WORK/cache3" prewarm m.txt -j 2 --packages pkw
expect_eq "$(ls pkw | grep -c '\.mlpackage$')" "3"
expect_in "$ERR" "prewarm: package pkw/"
# The tiny chunks are the programs build packaged: the same names, the same bytes.
for p in pkw/*.mlpackage; do
  n=$(basename "$p")
  if [ -d "pk/$n" ]; then expect_rc 0 diff -r "$p" "pk/$n"; fi
done

# Bad input: a file where the folder should be is exit 1, named; nothing built
# is lost (the cache keeps the programs).
: > afile
expect_rc 1 "$MILC" build --model tiny --chunk 1 --packages afile
expect_in "$ERR" "--packages 'afile': not a folder"
expect_rc 1 "$MILC" build --model tiny --chunk 1 --packages afile/sub
expect_in "$ERR" "--packages 'afile/sub'"
