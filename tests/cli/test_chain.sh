# Prefill then decode in one process through the Python binding (the example
# examples/chain_decode.py), KV caches carried between runs: the decoded
# tokens equal a single prefill of the whole sequence (causality), for GPT-2
# and Llama (RoPE, grouped-query), in every compile mode.  The example's
# cache lives in a temporary directory that must be gone afterwards.
LIB=$(dirname "$MILC")/../lib/libmilc.so
source "$SRC/tests/python/sanitized.sh" "$LIB"
export TMPDIR=$WORK/tmp
mkdir -p "$TMPDIR"
for model in tiny tiny-llama; do
  for mode in 0 1 2; do
    run "$PY" "$SRC/examples/chain_decode.py" --lib "$LIB" --model $model --mode $mode --prompt 12 --steps 3
    if [ "$RC" = 0 ]; then ok; else fail "chain $model mode $mode: $OUT $ERR"; fi
  done
  # The packed layout (mil-templates/README.md): same numbers through one input and one output.
  for mode in 0 2; do
    run "$PY" "$SRC/examples/chain_decode.py" --lib "$LIB" --model $model --mode $mode --prompt 12 --steps 3 --io packed
    if [ "$RC" = 0 ]; then ok; else fail "chain $model packed mode $mode: $OUT $ERR"; fi
  done
  # The cache held as states by the decode chunk (--kv state): seeded once, updated in place.
  for mode in 1 2; do
    run "$PY" "$SRC/examples/chain_decode.py" --lib "$LIB" --model $model --mode $mode --prompt 12 --steps 3 --kv state
    if [ "$RC" = 0 ]; then ok; else fail "chain $model kv state mode $mode: $OUT $ERR"; fi
  done
done
if [ -z "$(ls -A "$TMPDIR")" ]; then ok; else fail "the example left $(ls "$TMPDIR") behind"; fi
