# Every chunk milc generates by default passes `milc check --target ane`:
# both templates, prefill, decode and a verify batch of 8, tiny presets here
# (test_ane_chunks_slow.sh: the real shapes).  The packed I/O of
# mil-templates/README.md is what makes it so; the split layout still fails
# the one-allocation-size rule, which the check names.
ane_matrix() { # PRESET [OPTIONS...]
  local preset=$1; shift
  for phase in "--phase prefill" "--phase decode --seq 1" "--phase decode --seq 8"; do
    rm -rf chunk
    expect_rc 0 "$MILC" emit --model "$preset" $phase "$@" -o chunk -q
    run "$MILC" check chunk --target ane
    if [ "$RC" = 0 ] && [[ "$ERR" != *warning* ]]; then ok; else fail "$preset $phase $*: check --target ane exited $RC: $ERR"; fi
  done
}
ane_matrix tiny
ane_matrix tiny-llama
ane_matrix tiny --seq 20        # padded to 32
ane_matrix tiny-llama --seq 16  # prefill: 16 zero keys make the attention 32 deep
ane_matrix tiny-llama --layers 1 --first-layer 1

# The split layout keeps a tensor per input: the check refuses it by name.
rm -rf chunk
expect_rc 0 "$MILC" emit --model tiny-llama --phase decode --seq 1 --io split -o chunk -q
expect_rc 1 "$MILC" check chunk --target ane
expect_in "$ERR" "need equal allocation sizes"
# A head size the ANE's matmul cannot take (16 = 128 / 8): the check says which matmul.
expect_rc 0 "$MILC" emit --model tiny --heads 8 -o chunk2 -q
expect_rc 1 "$MILC" check chunk2 --target ane
expect_in "$ERR" "inner dimension that is a multiple of 32, not 16"
