# test_parity.sh's other weight sources, then the real shapes: GPT-2 124M (12
# layers in chunks of 4, its 50257-token vocabulary) and Llama 3.2 1B's shape
# cut to 2 layers (its 128256-token vocabulary, tied head), with random
# weights at initialization scale.
parity() {
  run "$PY" "$SRC/tests/cli/parity.py" "$MILC" "$@"
  if [ "$RC" = 0 ]; then ok; else fail "parity $*: $OUT $ERR"; fi
}
parity tiny random:0 --chunk 2
parity tiny-llama hf:1
parity gpt2 random:0 --chunk 4
parity llama-3.2-1b random:0 --chunk 2 "--extra=--model_layers 2 --ctx 64"
