# test_ane_chunks.sh (its tiny matrix too), then the real shapes: a 2-layer
# chunk of every preset (the model's last layers, as a chunked build makes
# them), prefill, decode and verify, passes `milc check --target ane`.
source "$SRC/tests/cli/test_ane_chunks.sh"
ane_matrix gpt2 --layers 2 --first-layer 10
ane_matrix gpt2-medium --layers 2 --first-layer 22
ane_matrix llama-3.2-1b --layers 2 --first-layer 14
