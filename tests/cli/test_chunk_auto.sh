# build --chunk auto: each chunk as deep as --max-chunk-bytes allows.  The
# expected split is computed here from the weight files `milc emit` writes
# for 1 and 2 layers (an independent measure of a chunk's weight bytes), so
# a wrong sum, an off-by-one at the ceiling or an ignored ceiling fails.
B=(--model tiny --model-layers 5 --layers 5)
size_of() { # size_of N FIRST: bytes of the weight file of N layers from FIRST
  rm -rf "em$1_$2"
  "$MILC" emit --model tiny --model-layers 5 --layers "$1" --first-layer "$2" -o "em$1_$2" >/dev/null
  stat -c %s "em$1_$2/weights/weight.bin"
}
S1=$(size_of 1 0); S2=$(size_of 2 0); S3=$(size_of 3 0); S3b=$(size_of 3 2)
expect_eq "$((S3 - S2))" "$((S2 - S1))"   # the tiny preset's layers are all alike
expect_eq "$S3b" "$S3"

# The ceiling exactly at 3 layers: 3 + 2; one byte less: 2 + 2 + 1.
expect_rc 0 "$MILC" build "${B[@]}" --chunk auto --max-chunk-bytes "$S3" --json
expect_json "$OUT" "[[c['first_layer'], c['layers'], c['weight_bytes']] for c in j['split'][0]['chunks']] == [[0, 3, $S3], [3, 2, $S2]]"
expect_json "$OUT" "j['split'][0]['max_chunk_bytes'] == $S3 and [b['chunk'] for b in j['builds']] == ['layers 0-2', 'layers 3-4']"
AUTO_KEYS=$(printf '%s' "$OUT" | "$PY" -c "import json,sys; print(' '.join(b['key'] for b in json.load(sys.stdin)['builds']))")
expect_rc 0 "$MILC" build "${B[@]}" --chunk 3 --json
expect_json "$OUT" "' '.join(b['key'] for b in j['builds']) == '$AUTO_KEYS' and all(b['outcome'] != 'miss' for b in j['builds'])"
expect_rc 0 "$MILC" build "${B[@]}" --chunk auto --max-chunk-bytes "$((S3 - 1))" --json
expect_json "$OUT" "[[c['first_layer'], c['layers']] for c in j['split'][0]['chunks']] == [[0, 2], [2, 2], [4, 1]]"
expect_json "$OUT" "all(c['weight_bytes'] <= $S3 - 1 for c in j['split'][0]['chunks'])"

# Text: the split before the builds; repeated, the request note finds every
# program and the split is still reported.
expect_rc 0 "$MILC" build "${B[@]}" --chunk auto --max-chunk-bytes "$S3"
expect_in "$OUT" "split: 2 chunks of at most"
expect_in "$OUT" "layers 0-2  3 layers"
expect_in "$OUT" "(request note)"
# ... from the note alone: no template is read, so libxml2 (loaded at the
# first template parse) never is (ld.so's LD_DEBUG=files names each library
# it loads; the first, template-reading run shows the check can fail).
expect_rc 0 env LD_DEBUG=files "$MILC" build "${B[@]}" --chunk auto --max-chunk-bytes "$((S3 + 1))"
if [[ "$ERR" == *libxml2* ]]; then
  expect_rc 0 env LD_DEBUG=files "$MILC" build "${B[@]}" --chunk auto --max-chunk-bytes "$((S3 + 1))"
  expect_in "$OUT" "split: 2 chunks of at most"
  expect_in "$OUT" "(request note)"
  expect_not_in "$ERR" "libxml2"
  expect_rc 0 "$MILC" build "${B[@]}" --chunk auto --max-chunk-bytes "$((S3 + 1))" --json
  expect_json "$OUT" "[[c['first_layer'], c['layers'], c['weight_bytes']] for c in j['split'][0]['chunks']] == [[0, 3, $S3], [3, 2, $S2]]"
  expect_json "$OUT" "all(b['note'] for b in j['builds'])"
fi
# K, M, G suffixes are powers of 1024; the default ceiling (1 GiB) takes the
# whole tiny model in one chunk.
expect_rc 0 "$MILC" build "${B[@]}" --chunk auto --max-chunk-bytes 1M --json
expect_json "$OUT" "j['split'][0]['max_chunk_bytes'] == 1048576"
expect_rc 0 "$MILC" build "${B[@]}" --chunk auto --json
expect_json "$OUT" "j['split'][0]['max_chunk_bytes'] == 1 << 30 and [c['layers'] for c in j['split'][0]['chunks']] == [5]"
# --whole: the embedding and the head around the chosen chunks.
expect_rc 0 "$MILC" build "${B[@]}" --chunk auto --max-chunk-bytes "$S3" --whole --json
expect_json "$OUT" "[b['chunk'] for b in j['builds']] == ['embed', 'layers 0-2', 'layers 3-4', 'head']"
# A parameter list: a split per combination (a longer sequence has a larger
# causal mask in every chunk, so it may cut differently).
expect_rc 0 "$MILC" build "${B[@]}" --chunk auto --max-chunk-bytes "$S3" --seq 16,32 --json
expect_json "$OUT" "[s['combination'] for s in j['split']] == ['seq=16', 'seq=32']"

# One layer over the ceiling: exit 1, naming the layer and the ceiling.
expect_rc 1 "$MILC" build "${B[@]}" --chunk auto --max-chunk-bytes "$((S1 - 1))"
expect_in "$ERR" "layer 0 alone takes $S1 bytes"
expect_in "$ERR" "--max-chunk-bytes $((S1 - 1))"
# Bad values: usage errors (exit 2), nothing built.
for bad in 0 1Q -5 12MB ""; do
  expect_rc 2 "$MILC" build "${B[@]}" --chunk auto --max-chunk-bytes "$bad"
  expect_in "$ERR" "--max-chunk-bytes wants a size such as 512M or 1G, not '$bad'"
done
expect_rc 2 "$MILC" build "${B[@]}" --chunk autox
expect_in "$ERR" "--chunk wants a number of layers in [1, 4096] or 'auto', not 'autox'"
expect_rc 2 "$MILC" build "${B[@]}" --chunk 3 --max-chunk-bytes 1M
expect_in "$ERR" "give --chunk auto too"

# A prewarm manifest line takes --chunk auto and --max-chunk-bytes too; its
# request note then serves `milc build` with the same options.
printf -- '--model tiny --model-layers 5 --layers 5 --chunk auto --max-chunk-bytes %s\n' "$S3" > auto.txt
expect_rc 0 "$MILC" --cache-dir "$WORK/pw" prewarm auto.txt -j 1
expect_in "$ERR" "prewarm: 2 programs: 2 built"
expect_rc 0 "$MILC" --cache-dir "$WORK/pw" build "${B[@]}" --chunk auto --max-chunk-bytes "$S3" --json
expect_json "$OUT" "[b['chunk'] for b in j['builds']] == ['layers 0-2', 'layers 3-4'] and all(b['note'] for b in j['builds'])"
printf -- '--model tiny --chunk 2 --max-chunk-bytes 1M\n' > bad1.txt
expect_rc 1 "$MILC" --cache-dir "$WORK/pw" prewarm bad1.txt
expect_in "$ERR" "bad1.txt:1:24: error: --max-chunk-bytes sizes the chunks of --chunk auto"
printf -- '--model tiny --chunk auto --max-chunk-bytes 1Q\n' > bad2.txt
expect_rc 1 "$MILC" --cache-dir "$WORK/pw" prewarm bad2.txt
expect_in "$ERR" "bad2.txt:1:27: error: --max-chunk-bytes wants a size such as 512M or 1G, not '1Q'"
printf -- '--model tiny --chunk autox\n' > bad3.txt
expect_rc 1 "$MILC" --cache-dir "$WORK/pw" prewarm bad3.txt
expect_in "$ERR" "--chunk wants a whole number >= 1 or 'auto', not 'autox'"
