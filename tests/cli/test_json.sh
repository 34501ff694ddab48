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
