# Drift: entries another milc made are listed by `cache verify --stale`,
# never served, and rebuilt from their stored recipe by `prewarm --stale`,
# costliest first.
AGE=$(dirname "$MILC")/../tests/cli/milc_age_cache
expect_rc 0 "$MILC" build --model tiny --seq 16,48 --json
k16=$(printf '%s' "$OUT" | "$PY" -c "import json,sys; print(json.load(sys.stdin)['builds'][0]['key'])")
expect_rc 0 "$MILC" cache verify --stale
expect_in "$OUT" "0 stale entries"
expect_rc 0 "$AGE" "$MILC_CACHE_DIR" 0.0-old
expect_in "$OUT" "aged 2 entries"
expect_rc 0 "$MILC" cache verify --stale
expect_in "$OUT" "2 stale entries"
expect_in "$OUT" "stale: milc version 0.0-old, this milc"
expect_rc 0 "$MILC" --json cache verify --stale
expect_json "$OUT" "len(j['stale']) == 2 and j['removed'] == 0"
# never served: the same request misses (and cache why says why)
expect_rc 0 "$MILC" cache why --model tiny --seq 16
expect_in "$OUT" "milc version 0.0-old -> "
expect_rc 0 "$MILC" build --model tiny --seq 16 --json
expect_json "$OUT" "j['builds'][0]['outcome'] == 'miss' and j['builds'][0]['key'] == '$k16'"
# nor by its key
old=$("$MILC" --json cache verify --stale | "$PY" -c "import json,sys; print(json.load(sys.stdin)['stale'][0]['key'])")
expect_rc 1 "$MILC" run "$old"
expect_in "$ERR" "was made by another milc (milc version 0.0-old"
# prewarm --stale rebuilds both recipes (the one just built is a hit)
expect_rc 0 "$MILC" --json prewarm --stale -j 2
expect_json "$OUT" "j['jobs'] == 2 and j['built'] == 1 and j['hits'] == 1 and j['failed'] == 0"
expect_rc 0 "$MILC" build --model tiny --seq 48 --json
expect_json "$OUT" "j['builds'][0]['outcome'] == 'direct_hit'"
# --repair removes the stale entries; then nothing is stale
expect_rc 0 "$MILC" cache verify --stale --repair
expect_in "$OUT" "2 stale entries removed"
expect_rc 0 "$MILC" cache verify --stale
expect_in "$OUT" "0 stale entries"
expect_rc 0 "$MILC" prewarm --stale
expect_in "$ERR" "no stale entries"
expect_rc 2 "$MILC" prewarm --stale some.manifest

# prewarm takes the costliest first: a never-built job before one that hits,
# and among jobs the ledger knows (here: another version's builds), the
# longest compile first
rm -rf "$MILC_CACHE_DIR"
expect_rc 0 "$MILC" build --model tiny --seq 16
printf -- '--model tiny --seq 16\n--model tiny --seq 48\n' > m1
expect_rc 0 "$MILC" prewarm m1 -j 1
expect_in "$OUT" "[1/2] built"
expect_in "$OUT" "[2/2] hit"
rm -rf "$MILC_CACHE_DIR"
expect_rc 0 "$MILC" build --model tiny --seq 16
expect_rc 0 "$MILC" build --layers 1
expect_rc 0 "$AGE" "$MILC_CACHE_DIR" 0.0-old
printf -- '--model tiny --seq 16\n--layers 1\n' > m2
expect_rc 0 "$MILC" prewarm m2 -j 1
first=$(printf '%s\n' "$OUT" | grep '^\[1/2\]')
expect_in "$first" "gpt2"
expect_not_in "$first" "tiny"

# An entry compiled by a milc of the same version whose runtime numbered its
# op kinds differently (two branches that each appended a kind) is another
# milc's too: its key's op-table field differs, so it is never served.
rm -rf "$MILC_CACHE_DIR"
expect_rc 0 "$MILC" build --model tiny --seq 16 --json
k16=$(printf '%s' "$OUT" | "$PY" -c "import json,sys; print(json.load(sys.stdin)['builds'][0]['key'])")
expect_rc 0 "$AGE" "$MILC_CACHE_DIR" other-op-table OPTB
expect_in "$OUT" "aged 1 entries"
expect_rc 0 "$MILC" cache verify --stale
expect_in "$OUT" "stale: runtime op table other-op-table, this milc "
expect_rc 0 "$MILC" build --model tiny --seq 16 --json
expect_json "$OUT" "j['builds'][0]['outcome'] == 'miss' and j['builds'][0]['key'] == '$k16'"
