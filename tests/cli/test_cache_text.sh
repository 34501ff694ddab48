# test_cache_text.sh — stored text reaches a terminal escaped (issue #14, item
# 11): a description with an OSC title sequence, a CSI, \r, \n, a C1 control
# and a non-UTF-8 byte is shown by `cache ls` and `cache show` with every
# control visible (\e, \r, \n, \xHH) and no raw control byte; --json keeps
# the exact text.
PUT="$(dirname "$MILC")/../tests/cache/put_text_entry"
DESC=$'evil\e]0;pwned\a\e[2J\rfake line\nkey: 00\xc2\x9b31m\xff end \\ ok \xc3\xa9'
"$PUT" "$WORK/cache" "$DESC" || fail "put_text_entry failed"
has_raw_control() { LC_ALL=C grep -qP '[\x00-\x08\x0b-\x1f\x7f]|\xc2[\x80-\x9f]' "$1"; }
run "$MILC" cache ls
printf '%s' "$OUT" > "$WORK/ls.txt"
has_raw_control "$WORK/ls.txt" && fail "cache ls prints raw control bytes: $(od -c "$WORK/ls.txt" | head -5)" || ok
expect_in "$OUT" 'evil\e]0;pwned\x07\e[2J\rfake line\nkey: 00\xc2\x9b31m\xff end \\ ok é'
[ "$(printf '%s\n' "$OUT" | wc -l)" = 2 ] && ok || fail "cache ls: the description forged extra lines: $OUT"
KEY=$(printf '%s\n' "$OUT" | tail -1 | cut -d' ' -f1)
run "$MILC" cache show "$KEY"
printf '%s' "$OUT" > "$WORK/show.txt"
has_raw_control "$WORK/show.txt" && fail "cache show prints raw control bytes" || ok
expect_in "$OUT" 'evil\e]0;pwned\x07'
run "$MILC" --json cache ls
printf '%s' "$OUT" | "$PY" -c 'import json, sys; d = json.loads(sys.stdin.buffer.read().decode("utf-8", "surrogateescape")); assert d[0]["description"].startswith("evil\x1b]0;pwned\x07\x1b[2J\rfake line\nkey"), d' \
  && ok || fail "cache ls --json does not carry the exact text: $OUT"
