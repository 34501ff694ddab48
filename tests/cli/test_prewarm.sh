# milc prewarm: parallel build of a manifest, idempotence, resume after kill,
# manifest errors at file:line:col.
cat > tiny.manifest <<'M'
# two tiny models, two modes, two sequence buckets
--model tiny --mode 0,2 --seq 16,32
--model tiny-llama --chunk 1 --mode 2   # one chunk per layer
M
expect_rc 0 "$MILC" prewarm tiny.manifest -j 2 --json
expect_json "$OUT" "j['jobs'] == 6 and j['built'] == 6 and j['failed'] == 0"
# Idempotent: a second run compiles nothing.
expect_rc 0 "$MILC" prewarm tiny.manifest -j 2 --json
expect_json "$OUT" "j['jobs'] == 6 and j['built'] == 0 and j['hits'] == 6"
expect_rc 0 "$MILC" cache ls --json
expect_json "$OUT" "len(j) == 6"
# Each line leaves its request note: `milc build` with the line's options
# finds every program without reading a template.
expect_rc 0 "$MILC" build --model tiny-llama --chunk 1 --mode 2 --json
expect_json "$OUT" "len(j['builds']) == 2 and all(b['outcome'] == 'direct_hit' and b['note'] for b in j['builds'])"
expect_rc 0 "$MILC" build --model tiny --mode 0,2 --seq 16,32 --json
expect_json "$OUT" "len(j['builds']) == 4 and all(b['note'] for b in j['builds'])"
# Plain progress lines when not on a terminal.
expect_rc 0 "$MILC" prewarm tiny.manifest -j 1
expect_in "$OUT" "[6/6]"

# Resumable: kill it mid-run, then a rerun finishes the rest and the cache verifies.
"$MILC" cache clear >/dev/null
cat > more.manifest <<'M'
--model tiny --seq 16,32,48,64 --mode 0,1,2
M
"$MILC" prewarm more.manifest -j 2 > /dev/null 2>&1 &
pid=$!
sleep 0.5
kill -9 $pid 2>/dev/null || true
pkill -9 -f "prewarm more.manifest" 2>/dev/null || true
wait $pid 2>/dev/null || true
expect_rc 0 "$MILC" cache verify
expect_rc 0 "$MILC" prewarm more.manifest -j 2 --json
expect_json "$OUT" "j['jobs'] == 12 and j['failed'] == 0 and j['built'] + j['hits'] == 12"
expect_rc 0 "$MILC" prewarm more.manifest --json
expect_json "$OUT" "j['built'] == 0"

# A bad manifest: every error with its location, nothing built.
cat > bad.manifest <<'M'
--model tiny
--model tiny --heads 3
model tiny
--model tiny --mode 5
--model no-such-model
M
run "$MILC" prewarm bad.manifest
expect_eq "$RC" 1
expect_in "$ERR" "bad.manifest:3:1: error: expected an option such as --model NAME, found 'model'"
expect_in "$ERR" "bad.manifest:4:1: error: mode '5' is not a compile mode (2=bonded 1=non-bonded 0=both)"
expect_in "$ERR" "bad.manifest:2"
expect_in "$ERR" "bad.manifest:5"
expect_rc 3 "$MILC" prewarm /nonexistent.manifest
printf '# nothing\n' > empty.manifest
expect_rc 1 "$MILC" prewarm empty.manifest
