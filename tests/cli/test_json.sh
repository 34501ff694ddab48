# Every --json output is JSON whatever the names in it: a quote, control
# characters and bytes that are not UTF-8 in a file or directory name are
# escaped (not UTF-8: U+FFFD), and the output parses as strict UTF-8 JSON.
# json_is PYEXPR: the last command's stdout, as bytes, is one JSON document
# and the expression over it (j) holds.
json_is() {
  if "$PY" -c "import json,sys; j=json.loads(open(sys.argv[1],'rb').read()); sys.exit(0 if ($1) else 1)" "$WORK/.out"
  then ok; else fail "JSON check '$1' failed on: $OUT"; fi
}
good=$(grep -L BLOBFILE "$SRC"/tests/mil/golden/*.mil | head -1)
quote='c"d.mil'
weird=$'e\x01\xff\n\\.mil'
cp "$good" "$WORK/$quote"
printf 'not a program' > "$WORK/$weird"

run "$MILC" check --json "$quote"
expect_eq "$RC" 0
json_is "j == {'file': 'c\"d.mil', 'valid': True}"
run "$MILC" check --json "$weird"
expect_eq "$RC" 1
json_is "j['diagnostics'][0]['file'] == 'e\x01\ufffd\n\\\\.mil' and j['diagnostics'][0]['level'] == 'error'"
run "$MILC" check --json --target ane --report "$quote"
json_is "j['file'] == 'c\"d.mil' and j['total'] == len(j['ops']) > 0 and all(isinstance(o, str) for o in j['other'])"

dir=$WORK/$'q"\x01\xff\ttab'
run "$MILC" --json --cache-dir "$dir" cache stat
expect_eq "$RC" 0
json_is "j['cache_dir'].endswith('/q\"\x01\ufffd\ttab') and j['entries'] == 0"
expect_rc 0 "$MILC" --cache-dir "$dir" build --model tiny -q
run "$MILC" --json --cache-dir "$dir" cache export "$WORK/$quote.bundle"
json_is "j['exported'] == 1 and j['file'].endswith('c\"d.mil.bundle')"
run "$MILC" --json --cache-dir "$dir" cache ls
json_is "len(j) == 1 and j[0]['mode'] == 2"
run "$MILC" --json --cache-dir "$dir" emit --model tiny -o "$WORK/$weird.out"
json_is "j['dir'].endswith('e\x01\ufffd\n\\\\.mil.out')"

# The ANE projection (`estimate`, `bench --project`) names the chip and its
# file: a quote, a backslash and a control character in the chip's name, and
# a quote, a control character and a byte that is not UTF-8 in its path.
chip=$WORK/$'ch"ip\x01\xff.json'
cat > "$WORK/chip.py" <<'PYEOF'
import json, sys
j = json.load(open(sys.argv[1]))
j['chip'] = 'Q"uote\\ \x01'
open(sys.argv[2].encode('utf-8', 'surrogateescape'), 'w').write(json.dumps(j))
PYEOF
expect_rc 0 "$PY" "$WORK/chip.py" "$SRC/data/ane/m4-max.json" "$chip"
run "$MILC" --json estimate --model tiny --chip "$chip"
expect_eq "$RC" 0
json_is "j['chip'] == 'Q\"uote\\\\ \x01' and j['chip_file'].endswith('/ch\"ip\x01\ufffd.json') and len(j['rows']) > 0"
run "$MILC" bench --quick --modes 2 --no-sweeps --repeat 1 --project ane --chip "$chip" --json
expect_eq "$RC" 0
json_is "j['schema'] == 'milc-bench/2' and j['projection']['chip'] == 'Q\"uote\\\\ \x01' and j['projection']['chip_file'].endswith('\ufffd.json')"
