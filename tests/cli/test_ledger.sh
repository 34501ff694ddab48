# The cost ledger: compile time, bytes, load time, hits and time saved per
# entry in `cache ls` and `cache stat`; `cache gc --policy value` evicts the
# least time saved per byte where the default evicts the least recently used;
# caches written before the load time existed stay readable.
ls_field() { "$MILC" --json cache ls | "$PY" -c "import json,sys; e={x['key']: x for x in json.load(sys.stdin)}; print(e['$1']['$2'] if '$1' in e else 'gone')"; }
key_of() { printf '%s' "$1" | "$PY" -c "import json,sys; print(json.load(sys.stdin)['builds'][0]['key'])"; }
expect_rc 0 "$MILC" build --model tiny --seq 32 --json; K=$(key_of "$OUT")
"$PY" -c "import numpy as np; np.save('x.npy', np.zeros((1,128,1,32), dtype=np.float32))"
expect_rc 0 "$MILC" run "$K" --input x=x.npy -o out
expect_rc 0 "$MILC" run "$K" --input x=x.npy -o out
expect_rc 0 "$MILC" build --model tiny --seq 16 --json; K16=$(key_of "$OUT")
expect_rc 0 "$MILC" build --model tiny --seq 48 --json; K48=$(key_of "$OUT")
expect_rc 0 "$MILC" --json cache ls
expect_json "$OUT" "[e for e in j if e['key'] == '$K'][0]['hits'] == 2 and [e for e in j if e['key'] == '$K'][0]['load_ms'] > 0"
expect_json "$OUT" "all(abs(e['saved_ms'] - e['hits'] * e['compile_ms']) < 0.01 and e['compile_ms'] > 0 for e in j)"
expect_json "$OUT" "[e for e in j if e['key'] == '$K16'][0]['load_ms'] == 0"
expect_rc 0 "$MILC" cache ls
expect_in "$OUT" "COMPILEms   LOADms   SAVED s"
# the most compile time saved per byte, from the ledger itself
best=$("$MILC" --json cache ls | "$PY" -c "import json,sys; print(max(json.load(sys.stdin), key=lambda e: e['compile_ms'] * (e['hits'] + 1) / e['bytes'])['key'])")
expect_rc 0 "$MILC" --json cache stat
expect_json "$OUT" "j['compile_ms_held'] > 0 and j['loads_recorded'] == 1 and j['most_saved_per_byte'][0] == '$best'"
expect_rc 0 "$MILC" cache stat
expect_in "$OUT" "compile time held"
# by value: only the entry worth the most per byte stays
bytes=$(ls_field "$K" bytes)
expect_rc 0 "$MILC" cache gc --policy value --max-size "$((bytes * 3 / 2))"
expect_in "$OUT" "evicted 2 entries"
expect_eq "$("$MILC" --json cache ls | "$PY" -c "import json,sys; print(' '.join(e['key'] for e in json.load(sys.stdin)))")" "$best"
expect_rc 2 "$MILC" cache gc --policy newest
# by age (the default): only the most recently used stays
expect_rc 0 "$MILC" build --model tiny --seq 16,32,48 --json
expect_rc 0 "$MILC" build --model tiny --seq 48 --json
expect_rc 0 "$MILC" cache gc --max-size "$((bytes * 3 / 2))"
expect_eq "$("$MILC" --json cache ls | "$PY" -c "import json,sys; print(' '.join(e['key'] for e in json.load(sys.stdin)))")" "$K48"
# a usage record of an older milc (24 bytes, no load time) still reads
"$PY" -c "import numpy as np; np.save('x48.npy', np.zeros((1,128,1,48), dtype=np.float32))"
expect_rc 0 "$MILC" run "$K48" --input x=x48.npy -o out
mdb_dump -s usage "$MILC_CACHE_DIR" | "$PY" -c "
import sys
body, out = False, []
for l in sys.stdin.read().split('\n'):
    if body and l.startswith(' ') and len(l.strip()) == 64: l = ' ' + l.strip()[:48]
    body = body or l == 'HEADER=END'
    out.append(l)
sys.stdout.write('\n'.join(out))" > usage.txt
if mdb_load -s usage -f usage.txt "$MILC_CACHE_DIR" 2> mdb_load.err; then ok; else fail "mdb_load: $(cat mdb_load.err)"; fi
expect_rc 0 "$MILC" --json cache ls
expect_json "$OUT" "len(j) == 1 and j[0]['load_ms'] == 0 and j[0]['hits'] >= 1"
expect_rc 0 "$MILC" build --model tiny --seq 48 --json
expect_json "$OUT" "j['builds'][0]['outcome'] == 'direct_hit'"
expect_rc 0 "$MILC" cache verify
expect_in "$OUT" "0 bad entries"
