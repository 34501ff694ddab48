# milc bench --whole on the tiny presets: the whole model (embedding, chunks,
# head) built in an empty cache, found again, loaded and run, in the report's
# text and JSON; every figure present, consistent with the others (tok/s from
# the times, each ratio from a pair, medians within their spreads) and the
# logits finite.  The GPT-2 124M run is a benchmark (cli/BENCH.md), not a test.
for model in tiny tiny-llama; do
  expect_rc 0 "$MILC" bench --model "$model" --quick --whole --modes 2 --no-sweeps --repeat 3 --chunk 1 --json
  J=$OUT
  expect_in "$ERR" "whole model: first call 1/1 on an empty cache"
  expect_json "$J" "j['whole']['mode'] == 2 and j['whole']['programs'] == 4 and j['whole']['chunks'] == 2"
  expect_json "$J" "j['whole']['seq'] == 32 and j['whole']['ctx'] == 64 and j['whole']['logits_finite']"
  expect_json "$J" "all(j['whole'][k]['median'] > 0 and j['whole'][k]['min'] <= j['whole'][k]['median'] <= j['whole'][k]['max']
    for k in ['first_call_ms', 'first_call_build_ms', 'cached_call_ms', 'cached_lookup_ms', 'cached_load_ms',
              'steady_prefill_ms', 'decode_ms', 'cached_over_steady'])"
  expect_json "$J" "j['whole']['cached_call_ms']['n'] == 3 and j['whole']['cached_over_steady']['n'] == 3 and j['whole']['decode_ms']['n'] == 16"
  # The first call compiles: its builds take longer than the cached lookups,
  # and the first call holds its builds.
  expect_json "$J" "j['whole']['first_call_build_ms']['median'] > j['whole']['cached_lookup_ms']['median']"
  expect_json "$J" "j['whole']['first_call_ms']['median'] >= j['whole']['first_call_build_ms']['median']"
  expect_json "$J" "abs(j['whole']['steady_prefill_tok_s'] - 32000 / j['whole']['steady_prefill_ms']['median']) < 1e-4 * j['whole']['steady_prefill_tok_s']"
  expect_json "$J" "abs(j['whole']['decode_tok_s'] - 1000 / j['whole']['decode_ms']['median']) < 1e-4 * j['whole']['decode_tok_s']"
  expect_json "$J" "abs(j['whole']['cached_prefill_tok_s'] - 32000 / j['whole']['cached_call_ms']['median']) < 1e-4 * j['whole']['cached_prefill_tok_s']"
  expect_json "$J" "j['whole']['artifact_bytes'] > 0"
done

# Text: the whole-model section after the chunk figures; without --whole the
# JSON says null and the text has no such section.
mkdir -p "$WORK/tmp"
expect_rc 0 env TMPDIR="$WORK/tmp" "$MILC" bench --quick --whole --modes 0,2 --no-sweeps
expect_in "$OUT" "whole model (tiny: embedding, 2 chunks, head; mode 2; T=32"
expect_in "$OUT" "cached first call / steady"
expect_in "$OUT" "first call, empty cache"
expect_rc 0 "$MILC" bench --quick --modes 1 --no-sweeps --json
expect_json "$OUT" "j['whole'] is None"
expect_rc 0 "$MILC" bench --quick --modes 1 --no-sweeps
expect_not_in "$OUT" "whole model"
# The whole-model caches are made in the run's scratch directory and go with it.
expect_eq "$(ls -A "$WORK/tmp")" ""
