# Why a miss: `milc build --explain` and `milc cache why` name the nearest
# stored entries of the template and the key fields that differ.
W=("$MILC" cache why --model tiny)
expect_rc 0 "$MILC" build --model tiny --json
K=$(printf '%s' "$OUT" | "$PY" -c "import json,sys; print(json.load(sys.stdin)['builds'][0]['key'])")
expect_rc 0 "${W[@]}"
expect_in "$OUT" "tiny: in the cache"
expect_rc 0 "${W[@]}" --seq 48
expect_in "$OUT" "not in the cache; nearest stored entries of template gpt2"
expect_in "$OUT" "$K  1 field differs: seq 32 -> 48"
expect_rc 0 "${W[@]}" --mode 1 --weights random:3
expect_in "$OUT" "mode 2 -> 1"
expect_in "$OUT" "weight source random:0 -> random:3"
expect_in "$OUT" "weight digest"
expect_rc 0 "$MILC" --json cache why --model tiny --seq 48
expect_json "$OUT" "j['explain'][0]['hit'] == False and j['explain'][0]['nearest'][0]['key'] == '$K' and j['explain'][0]['nearest'][0]['differs'] == [{'field': 'seq', 'stored': '32', 'asked': '48'}]"
# another template has no near entry
expect_rc 0 "$MILC" cache why --model tiny-llama
expect_in "$OUT" "no stored entry of template llama"
# build --explain explains first, then builds; the entry it builds is then a hit
expect_rc 0 "$MILC" build --model tiny --seq 48 --explain
expect_in "$OUT" "1 field differs: seq 32 -> 48"
expect_in "$OUT" "miss"
expect_rc 0 "${W[@]}" --seq 48
expect_in "$OUT" "in the cache"
# an entry whose artifact was removed: its direct key is still the nearest
expect_rc 0 "$MILC" cache rm "$K"
expect_rc 0 "${W[@]}"
expect_in "$OUT" "0 fields differ: none (its artifact is gone"
# bad input
expect_rc 1 "${W[@]}" --no-such-param 3
expect_rc 2 "$MILC" cache why extra
