# Whole models, token ids to logits, through milc run (the embedding, layer
# chunks and head of --part embed|layers|head) against an independent PyTorch
# implementation of the Hugging Face GPT-2 and Llama (parity.py): the
# prefill's logits and 16 greedy decode steps, relative L2 <= 2e-3 and the
# same tokens; milc's random weights and a Hugging Face .safetensors; the
# decode with the cache as inputs and outputs and as states.
# test_parity_slow.sh: the other weight sources, and the real shapes.
parity() {
  run "$PY" "$SRC/tests/cli/parity.py" "$MILC" "$@"
  if [ "$RC" = 0 ]; then ok; else fail "parity $*: $OUT $ERR"; fi
}
parity tiny hf:1
parity tiny-llama random:0 --chunk 2
parity tiny-llama hf:2 --extra=--tied=0
# the decode chain with the cache as states (--kv state), carried run to run by --state
parity tiny hf:1 --kv state
parity tiny-llama hf:2 --chunk 2 --kv state

# Bad input: an id past the vocabulary, a position past the model's, more
# tokens than positions, a checkpoint without the embedding: exit 1, named.
"$PY" -c "
import numpy as np
np.save('ids.npy', np.array([[1, 2, 512, 3]], np.int32)); np.save('pos.npy', np.arange(4, dtype=np.int32)[None])
np.save('ok.npy', np.array([[1, 2, 511, 3]], np.int32)); np.save('far.npy', np.array([[0, 1, 2, 128]], np.int32))"
E=(run --model tiny --part embed --seq 4 --min-seq 1)
expect_rc 0 "$MILC" "${E[@]}" --input input_ids=ok.npy --input position_ids=pos.npy -o out
expect_rc 1 "$MILC" "${E[@]}" --input input_ids=ids.npy --input position_ids=pos.npy -o out
expect_in "$ERR" "a token id at or above the vocabulary"
expect_rc 1 "$MILC" "${E[@]}" --input input_ids=ok.npy --input position_ids=far.npy -o out
expect_in "$ERR" "out of range"
expect_rc 1 "$MILC" emit --model tiny --part embed --seq 200 -o big
expect_in "$ERR" "--seq 200 (padded to 208) does not fit the model's 128 positions"
"$PY" -c "
import json, struct, numpy as np
b = np.ones(128, np.float32).tobytes()
h = json.dumps({n: {'dtype': 'F32', 'shape': [128], 'data_offsets': [i * 512, i * 512 + 512]}
                for i, n in enumerate(['ln_f.weight', 'ln_f.bias'])}).encode()
open('noemb.safetensors', 'wb').write(struct.pack('<Q', len(h)) + h + b + b)"
expect_rc 1 "$MILC" emit --model tiny --part head --weights noemb.safetensors -o nohead
expect_in "$ERR" "wte.weight"

# build --whole: the embedding, the chunks and the head, found again by the
# request's note; without --whole the same request is the chunks alone.
expect_rc 0 "$MILC" build --model tiny --chunk 1 --whole --json
expect_json "$OUT" "[b['chunk'] for b in j['builds']] == ['embed', 'layers 0-0', 'layers 1-1', 'head'] and all(b['outcome'] == 'miss' for b in j['builds'])"
expect_rc 0 "$MILC" build --model tiny --chunk 1 --whole --json
expect_json "$OUT" "len(j['builds']) == 4 and all(b['outcome'] == 'direct_hit' for b in j['builds'])"
expect_rc 0 "$MILC" build --model tiny --chunk 1 --json
expect_json "$OUT" "[b['chunk'] for b in j['builds']] == ['layers 0-0', 'layers 1-1']"
# The ends of a model cut to fewer layers than its preset's are not layer chunks.
expect_rc 0 "$MILC" emit --model tiny-llama --part head --model_layers 1 -o cut -q
